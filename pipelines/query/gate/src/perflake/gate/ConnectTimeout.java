package perflake.gate;

import java.util.Iterator;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

import org.apache.spark.SparkEnv;
import org.apache.spark.sql.connect.service.ExecuteHolder;
import org.apache.spark.sql.connect.service.SparkConnectService$;

/** Spark Connect's statement timeout, the JDBC endpoint's own setting
 * (spark.sql.thriftServer.queryTimeout): once a second a daemon thread of the service
 * looks at Connect's operations (Spark Connect's execution manager: ExecutePlan calls,
 * nothing else) and interrupts, through that manager, each that has run longer. Spark
 * then cancels the operation's jobs by its tag and ends the call; ConnectGuard replaces
 * Spark's "operation cancelled" with `sentence()`; the audit log says `timed-out`. Jobs
 * that are not a Connect operation's (JDBC statements, which HiveServer2 times out itself)
 * are never touched. 0 disables it. */
final class ConnectTimeout {
    static final String SETTING = "spark.sql.thriftServer.queryTimeout";
    private static final long FORGET_NS = TimeUnit.MINUTES.toNanos(30);
    /** Operation id -> when it was interrupted (System.nanoTime), forgotten after FORGET_NS. */
    private static final Map<String, Long> STOPPED = new ConcurrentHashMap<>();
    private static ScheduledExecutorService watchdog;
    private static volatile long timeoutS = -1;  // -1: not read yet (the service's conf comes with SparkEnv)

    private ConnectTimeout() {}

    /** Start the watchdog once per JVM (the guard is created when Connect's server starts). */
    static synchronized void start() {
        if (watchdog != null) {
            return;
        }
        watchdog = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "perflake-connect-timeout");
            t.setDaemon(true);
            return t;
        });
        watchdog.scheduleWithFixedDelay(ConnectTimeout::tick, 1, 1, TimeUnit.SECONDS);
    }

    /** Whether the watchdog stopped operation `id`. */
    static boolean stopped(String id) {
        return id != null && STOPPED.containsKey(id);
    }

    /** What a client whose statement was stopped reads: one sentence, the timeout and what to do. */
    static String sentence() {
        return "perflake stopped this statement: it timed out after " + timeoutS + " s, the SQL service's limit "
               + "for every statement (" + SETTING + "); narrow it (filter on dt or pool, aggregate, or add a LIMIT) "
               + "and run it again.";
    }

    private static void tick() {
        try {
            if (timeoutS < 0) {
                SparkEnv env = SparkEnv.get();
                if (env == null) {
                    return;
                }
                timeoutS = env.conf().getTimeAsSeconds(SETTING, "0");
            }
            long now = System.nanoTime();
            STOPPED.values().removeIf(at -> now - at > FORGET_NS);
            if (timeoutS <= 0) {
                return;
            }
            for (Map.Entry<Thread, Analyses.Call> analysis : Analyses.RUNNING.entrySet()) {
                Analyses.Call call = analysis.getValue();
                if (now - call.startNs > TimeUnit.SECONDS.toNanos(timeoutS)
                    && Analyses.interrupt(analysis.getKey(), call)) {
                    Audit.write("timed-out", "user", call.user, "session", call.session, "rpc", "AnalyzePlan",
                                "reason", sentence());
                }
            }
            Iterator<ExecuteHolder> running = scala.jdk.javaapi.CollectionConverters.asJava(
                SparkConnectService$.MODULE$.executionManager().listExecuteHolders()).iterator();
            while (running.hasNext()) {
                ExecuteHolder op = running.next();
                if (now - op.creationTimeNs() > TimeUnit.SECONDS.toNanos(timeoutS) && op.isExecuteThreadRunnerAlive()
                    && STOPPED.putIfAbsent(op.operationId(), now) == null) {
                    op.interrupt();
                    Audit.write("timed-out", "user", op.key().userId(), "session", op.key().sessionId(), "id",
                                op.operationId(), "reason", sentence());
                }
            }
        } catch (RuntimeException | LinkageError e) {  // the watchdog must outlive one bad look
            System.err.println("perflake connect timeout: " + e);
        }
    }
}
