package perflake.gate;

import org.apache.spark.QueryContext;
import org.apache.spark.sql.AnalysisException;
import org.apache.spark.sql.catalyst.ExtendedAnalysisException;

import scala.Option;

/** A statement the gate refuses: one sentence naming what was refused and why.
 *
 * An AnalysisException, so that every client shows it as a user error: PySpark turns it
 * into pyspark.errors.AnalysisException, the Thrift server into a HiveSQLException with
 * the sentence as its message, and neither prints a JVM stack trace to the user. */
public final class Refusal extends ExtendedAnalysisException {
    public static final String PREFIX = "perflake refused this statement: ";

    public Refusal(String what, String why) {
        // Extended, with no plan: Spark's analyzer would otherwise wrap it and append the
        // whole plan to the one sentence.
        super(new AnalysisException(PREFIX + what + " " + why + ".", Option.empty(), Option.empty(), Option.empty(),
                                    Option.empty(), scala.collection.immutable.Map$.MODULE$.empty(),
                                    new QueryContext[0]), null);
    }

    @Override
    public synchronized Throwable fillInStackTrace() {
        return this;  // a refusal is an answer, not a fault: no trace to log or to show
    }
}
