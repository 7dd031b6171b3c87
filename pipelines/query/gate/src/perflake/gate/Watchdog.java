package perflake.gate;

/** The service's watchdogs (timeouts, runaway threads): a daemon thread of their own each,
 * which runs `tick` once a second, a second after the last look ended, for as long as the
 * service runs. Nothing a look throws ends the thread: a statement that fills the heap
 * makes an OutOfMemoryError land on whichever thread allocates next (measured: this one
 * among them), and a ScheduledExecutorService drops a periodic task after its first throw,
 * which had left the service without its timeouts and runaway stops. */
final class Watchdog {
    private Watchdog() {}

    static void everySecond(String name, Runnable tick) {
        Thread t = new Thread(() -> {
            while (true) {
                try {
                    Thread.sleep(1000);
                    tick.run();
                } catch (Throwable e) {  // InterruptedException included: nothing stops a watchdog
                    try {
                        System.err.println(name + ": " + e);
                    } catch (Throwable ignored) {  // no memory even for the message: the next look
                    }
                }
            }
        }, name);
        t.setDaemon(true);
        t.start();
    }
}
