package perflake.gate;

import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.parser.ParserInterface;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;

import scala.Function1;
import scala.runtime.AbstractFunction1;
import scala.runtime.AbstractFunction2;
import scala.runtime.BoxedUnit;

/** The entry point named by spark.sql.extensions=perflake.gate.Extension: injects the
 * gate's parser (judges parsed statements), its check rule (judges analyzed plans) and,
 * when spark.perflake.gate.maxRows is set, the row cap. */
public final class Extension extends AbstractFunction1<SparkSessionExtensions, BoxedUnit> {
    public static final String MAX_ROWS = "spark.perflake.gate.maxRows";

    @Override
    public BoxedUnit apply(SparkSessionExtensions ext) {
        ext.injectParser(new AbstractFunction2<org.apache.spark.sql.SparkSession, ParserInterface, ParserInterface>() {
            @Override
            public ParserInterface apply(org.apache.spark.sql.SparkSession session, ParserInterface delegate) {
                return new GateParser((org.apache.spark.sql.classic.SparkSession) session, delegate);
            }
        });
        ext.injectCheckRule(new AbstractFunction1<org.apache.spark.sql.SparkSession, Function1<LogicalPlan, BoxedUnit>>() {
            @Override
            public Function1<LogicalPlan, BoxedUnit> apply(org.apache.spark.sql.SparkSession session) {
                org.apache.spark.sql.classic.SparkSession classic = (org.apache.spark.sql.classic.SparkSession) session;
                return new AbstractFunction1<LogicalPlan, BoxedUnit>() {
                    @Override
                    public BoxedUnit apply(LogicalPlan plan) {
                        Gate.checkAnalyzed(plan, classic);
                        return BoxedUnit.UNIT;
                    }
                };
            }
        });
        ext.injectOptimizerRule(new AbstractFunction1<org.apache.spark.sql.SparkSession, Rule<LogicalPlan>>() {
            @Override
            public Rule<LogicalPlan> apply(org.apache.spark.sql.SparkSession session) {
                long cap = Long.parseLong(session.sparkContext().getConf().get(MAX_ROWS, "0"));
                return new RowCap(cap);
            }
        });
        return BoxedUnit.UNIT;
    }
}
