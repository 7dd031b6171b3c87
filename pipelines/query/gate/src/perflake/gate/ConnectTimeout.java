package perflake.gate;

import java.util.Iterator;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

import org.apache.spark.sql.connect.service.ExecuteHolder;
import org.apache.spark.sql.connect.service.SparkConnectService$;

/** Spark Connect's statement timeout (StatementTimeout, JdbcTimeout's twin): once a
 * second a daemon thread of the service
 * looks at Connect's operations (Spark Connect's execution manager: ExecutePlan calls,
 * nothing else) and interrupts, through that manager, each that has run longer. Spark
 * then cancels the operation's jobs by its tag and ends the call; ConnectGuard replaces
 * Spark's "operation cancelled" with StatementTimeout's sentence; the audit log says
 * `timed-out`. Jobs that are not a Connect operation's (JDBC statements: JdbcTimeout) are
 * never touched. 0 disables it. */
final class ConnectTimeout {
    private static final long FORGET_NS = TimeUnit.MINUTES.toNanos(30);
    /** Operation id -> when it was interrupted (System.nanoTime), forgotten after FORGET_NS. */
    private static final Map<String, Long> STOPPED = new ConcurrentHashMap<>();
    private static boolean started;

    private ConnectTimeout() {}

    /** Start the watchdog once per JVM (the guard is created when Connect's server starts). */
    static synchronized void start() {
        if (!started) {
            started = true;
            Watchdog.everySecond("perflake-connect-timeout", ConnectTimeout::tick);
        }
    }

    /** Whether the watchdog stopped operation `id`. */
    static boolean stopped(String id) {
        return id != null && STOPPED.containsKey(id);
    }

    private static void tick() {
        long timeoutS = StatementTimeout.seconds();
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
                            "reason", StatementTimeout.sentence());
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
                            op.operationId(), "reason", StatementTimeout.sentence());
            }
        }
    }
}
