package perflake.gate;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerEvent;
import org.apache.spark.sql.hive.thriftserver.ui.SparkListenerThriftServerOperationStart;

/** The JDBC endpoint's statement timeout (StatementTimeout), told to the client in
 * perflake's own sentence.
 *
 * HiveServer2's own timeout (spark.sql.thriftServer.queryTimeout) ends a statement in the
 * TIMEDOUT state, and Hive's JDBC driver then prints a text of its own making, "Query timed
 * out after 0 seconds" (its own statement's timeout, not the service's): the user learns
 * neither the limit nor what to do. So this listener stops the statement first: once a
 * second a daemon thread cancels the jobs of each statement that has run longer than the
 * limit (its job group, which HiveServer2 names after the statement, now and any it starts
 * later) with StatementTimeout's sentence as the reason. The statement then fails with that
 * sentence in its error, which the driver shows, and the audit log says `timed-out`.
 * HiveServer2's timeout stays, a few seconds later, for a statement with no job to cancel
 * (one the optimizer spends its time on, before any job); RunawayTasks stops the threads
 * of either that ignore being cancelled. Registered through spark.extraListeners on the SQL
 * server only. */
public final class JdbcTimeout extends SparkListener {
    /** A statement's group id -> when it started (System.currentTimeMillis), until it ends. */
    private final Map<String, Long> running = new ConcurrentHashMap<>();
    private final long timeoutMs;

    public JdbcTimeout(SparkConf conf) {
        this.timeoutMs = TimeUnit.SECONDS.toMillis(StatementTimeout.read(conf));
        if (timeoutMs <= 0) {
            return;
        }
        Watchdog.everySecond("perflake-jdbc-timeout", this::tick);
    }

    @Override
    public void onOtherEvent(SparkListenerEvent event) {
        if (timeoutMs <= 0) {
            return;
        }
        if (event instanceof SparkListenerThriftServerOperationStart) {
            SparkListenerThriftServerOperationStart e = (SparkListenerThriftServerOperationStart) event;
            running.put(e.groupId(), e.startTime());
            return;
        }
        String n = Gate.name(event);  // Finish, Error, Canceled, Timeout, Closed: the statement has ended
        if (n.startsWith("SparkListenerThriftServerOperation") && !n.endsWith("Parsed")) {
            Object id = AuditListener.call(event, "id");
            if (id != null) {
                running.remove(String.valueOf(id));  // HiveServer2's group id is the statement id
            }
        }
    }

    private void tick() {
        long now = System.currentTimeMillis();
        for (Map.Entry<String, Long> statement : running.entrySet()) {
            if (now - statement.getValue() > timeoutMs) {
                SparkContext.getOrCreate().cancelJobGroupAndFutureJobs(statement.getKey(),
                                                                       StatementTimeout.sentence());
                running.remove(statement.getKey());  // once: later jobs of the group are cancelled as they start
            }
        }
    }
}
