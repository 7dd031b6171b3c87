package perflake.gate;

import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

/** The service's watchdogs (timeouts, runaway threads): a daemon thread of their own each,
 * which runs `tick` once a second, a second after the last look ended. */
final class Watchdog {
    private Watchdog() {}

    static void everySecond(String name, Runnable tick) {
        Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, name);
            t.setDaemon(true);
            return t;
        }).scheduleWithFixedDelay(tick, 1, 1, TimeUnit.SECONDS);
    }
}
