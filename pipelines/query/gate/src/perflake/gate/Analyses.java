package perflake.gate;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/** Spark Connect's AnalyzePlan calls in progress (a schema, an `explain`, `isLocal`...): each
 * runs on a gRPC thread of the service, outside any operation, so neither Connect's
 * operation timeout nor HiveServer2's reaches it. Its planning can still take any time:
 * `explain()` of a statement whose optimizer folds a quadratic `levenshtein` over two
 * literal strings of 1.2 million characters kept a core busy for minutes after the client
 * gave up (measured). ConnectGuard enters each call here while its handler runs;
 * ConnectTimeout interrupts one that outlives the statement timeout, and RunawayTasks
 * stops it if it computes on regardless. */
final class Analyses {
    /** A call in progress: when it began (System.nanoTime), who asked, and whether the
     * timeout has interrupted it. `interrupted` and `ended` change only under the call's
     * lock, so the timeout's interrupt and the call's end never cross (below). */
    static final class Call {
        final long startNs = System.nanoTime();
        final String user;
        final String session;
        volatile boolean interrupted;
        private boolean ended;

        Call(String user, String session) {
            this.user = user;
            this.session = session;
        }
    }

    static final Map<Thread, Call> RUNNING = new ConcurrentHashMap<>();

    private Analyses() {}

    static Call enter(String user, String session) {
        Call call = new Call(user, session);
        RUNNING.put(Thread.currentThread(), call);
        return call;
    }

    /** The call on this thread has ended: forget it, and clear an interrupt the timeout sent
     * before the end (the gRPC thread serves other calls next). Once `ended` is set, no
     * interrupt comes (`interrupt`), so none can land on the thread's next call. */
    static void leave(Call call) {
        synchronized (call) {
            call.ended = true;
        }
        RUNNING.remove(Thread.currentThread());
        Thread.interrupted();
    }

    /** Interrupts `thread`, which runs `call`, unless the call has already ended or been
     * interrupted; true when this sent the interrupt. */
    static boolean interrupt(Thread thread, Call call) {
        synchronized (call) {
            if (call.ended || call.interrupted) {
                return false;
            }
            call.interrupted = true;
            thread.interrupt();
            return true;
        }
    }

    static boolean running(Thread thread) {
        return RUNNING.containsKey(thread);
    }
}
