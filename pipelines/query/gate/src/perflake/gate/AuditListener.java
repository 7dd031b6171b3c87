package perflake.gate;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerEvent;
import org.apache.spark.sql.hive.thriftserver.ui.SparkListenerThriftServerOperationError;
import org.apache.spark.sql.hive.thriftserver.ui.SparkListenerThriftServerOperationFinish;
import org.apache.spark.sql.hive.thriftserver.ui.SparkListenerThriftServerOperationStart;
import org.apache.spark.sql.hive.thriftserver.ui.SparkListenerThriftServerSessionClosed;
import org.apache.spark.sql.hive.thriftserver.ui.SparkListenerThriftServerSessionCreated;

/** Names the user of every statement the JDBC endpoint runs, and how it ended (finished,
 * refused, failed, cancelled or timed out), in the audit log. Registered through
 * spark.extraListeners on the SQL server only. */
public final class AuditListener extends SparkListener {
    private final Map<String, String> users = new ConcurrentHashMap<>();

    @Override
    public void onOtherEvent(SparkListenerEvent event) {
        if (event instanceof SparkListenerThriftServerSessionCreated) {
            SparkListenerThriftServerSessionCreated e = (SparkListenerThriftServerSessionCreated) event;
            Audit.write("session-open", "user", e.userName(), "ip", e.ip(), "session", e.sessionId());
        } else if (event instanceof SparkListenerThriftServerSessionClosed) {
            SparkListenerThriftServerSessionClosed e = (SparkListenerThriftServerSessionClosed) event;
            Audit.write("session-close", "session", e.sessionId());
        } else if (event instanceof SparkListenerThriftServerOperationStart) {
            SparkListenerThriftServerOperationStart e = (SparkListenerThriftServerOperationStart) event;
            users.put(e.id(), e.userName());
            Audit.write("query", "user", e.userName(), "session", e.sessionId(), "id", e.id(),
                        "statement", e.statement());
        } else if (event instanceof SparkListenerThriftServerOperationError) {
            SparkListenerThriftServerOperationError e = (SparkListenerThriftServerOperationError) event;
            String msg = e.errorMsg() == null ? "" : e.errorMsg();
            String outcome = msg.contains(Refusal.PREFIX) ? "refused"
                             : msg.contains(StatementTimeout.PREFIX) ? "timed-out" : "failed";  // JdbcTimeout's
            Audit.write(outcome, "user", users.remove(e.id()), "id", e.id(), "reason", firstLine(msg));
        } else if (event instanceof SparkListenerThriftServerOperationFinish) {
            SparkListenerThriftServerOperationFinish e = (SparkListenerThriftServerOperationFinish) event;
            Audit.write("finished", "user", users.remove(e.id()), "id", e.id());
        } else {
            String n = Gate.name(event);
            if (n.startsWith("SparkListenerThriftServerOperation") && (n.endsWith("Canceled")
                                                                       || n.endsWith("Timeout"))) {
                String id = String.valueOf(call(event, "id"));
                Audit.write(n.endsWith("Timeout") ? "timed-out" : "cancelled", "user", users.remove(id), "id", id);
            }
        }
    }

    static Object call(Object target, String method) {
        try {
            return target.getClass().getMethod(method).invoke(target);
        } catch (ReflectiveOperationException e) {
            return null;
        }
    }

    private static String firstLine(String s) {
        int i = s.indexOf('\n');
        return i < 0 ? s : s.substring(0, i);
    }
}
