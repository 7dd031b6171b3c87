package perflake.gate;

import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.Literal$;
import org.apache.spark.sql.catalyst.plans.logical.GlobalLimit;
import org.apache.spark.sql.catalyst.plans.logical.Limit$;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;

/** At most `cap` result rows per statement: the root of every top-level plan gets a LIMIT.
 * Subqueries are optimized under a `Subquery` root and are left alone, so that a cap
 * never changes what an IN or EXISTS sees. */
public final class RowCap extends Rule<LogicalPlan> {
    private final long cap;

    public RowCap(long cap) {
        this.cap = cap;
    }

    @Override
    public LogicalPlan apply(LogicalPlan plan) {
        if (cap <= 0 || Gate.name(plan).equals("Subquery") || Gate.name(plan).equals("CommandResult")) {
            return plan;
        }
        if (plan instanceof GlobalLimit) {
            Object limit = ((GlobalLimit) plan).limitExpr();
            if (limit instanceof Literal && ((Literal) limit).value() instanceof Integer
                && ((Integer) ((Literal) limit).value()) <= cap) {
                return plan;
            }
        }
        return (LogicalPlan) Limit$.MODULE$.apply(Literal$.MODULE$.apply((int) cap), plan);
    }
}
