package perflake.gate;

import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.SubqueryExpression;
import org.apache.spark.sql.catalyst.plans.QueryPlan;
import org.apache.spark.sql.catalyst.plans.logical.CTERelationDef;
import org.apache.spark.sql.catalyst.plans.logical.CTERelationRef;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Range;
import org.apache.spark.sql.catalyst.plans.logical.RebalancePartitions;
import org.apache.spark.sql.catalyst.plans.logical.Repartition;
import org.apache.spark.sql.catalyst.plans.logical.RepartitionByExpression;
import org.apache.spark.sql.classic.SparkSession;

import scala.jdk.javaapi.CollectionConverters;

/** How many partitions a statement may ask for by number.
 *
 * A partition is a task that the service's driver plans, schedules and tracks in its own
 * memory, and a statement names that number itself: `range(0, 10, 1, n)`, the hints
 * REPARTITION(n), COALESCE(n), REPARTITION_BY_RANGE(n) and REBALANCE(n), or over Spark
 * Connect `spark.range(..., numPartitions=n)` and `df.repartition(n)`. Measured on the JDBC
 * server (1 GiB driver heap): a REPARTITION(3000000) hint on `count(*) FROM range(10)` ran
 * the DAG scheduler's thread out of memory, which stops the SparkContext: every later
 * statement of every user failed until the service was restarted; `range(0, 10, 1,
 * 2000000000)` ran the statement's own thread out of memory. The statement timeout
 * cannot help, as the scheduler dies before a task runs. So the analyzed plan (views
 * expanded) is refused when the partitions its ranges and repartitions ask for add up to
 * more than DEFAULT_MAX_PARTITIONS (Spark setting {@value #MAX_PARTITIONS}); a range
 * without a number counts the session's default parallelism, a repartition by
 * expressions without one the shuffle partitions, and a WITH query once per reference,
 * as Spark inlines it. Partitions that a query gets from the data it reads (files) are
 * bounded by the lake, not by the statement, and are not counted. */
final class PartitionBound {
    static final String MAX_PARTITIONS = "spark.perflake.gate.maxPartitions";
    static final long DEFAULT_MAX_PARTITIONS = 20_000;

    private PartitionBound() {}

    static void check(LogicalPlan plan, SparkSession session) {
        long max = session.sparkContext().getConf().getLong(MAX_PARTITIONS, DEFAULT_MAX_PARTITIONS);
        Counter counter = new Counter(session.leafNodeDefaultParallelism());
        for (QueryPlan<?> node : Gate.nodes(plan, true)) {
            if (node instanceof CTERelationDef) {
                counter.definitions.put(((CTERelationDef) node).id(), ((CTERelationDef) node).child());
            }
        }
        long asked = counter.count(plan);
        if (asked > max) {
            throw Gate.refuse(String.format("a plan that asks for %,d partitions", asked),
                              String.format("is over this service's limit of %,d (%s): each partition is a task the "
                                            + "shared service's driver plans and tracks in its memory; ask for fewer "
                                            + "(range's fourth argument, REPARTITION or COALESCE hints)",
                                            max, MAX_PARTITIONS));
        }
    }

    /** Partitions asked for by a plan and everything under it (each number is an int, a
     * sum of them saturates long before it could overflow). */
    private static final class Counter {
        final Map<Long, LogicalPlan> definitions = new HashMap<>();
        final Map<Long, Long> counted = new HashMap<>();
        final Set<Long> open = new HashSet<>();
        final int defaultSlices;

        Counter(int defaultSlices) {
            this.defaultSlices = defaultSlices;
        }

        long count(QueryPlan<?> plan) {
            if (plan instanceof CTERelationDef) {
                return 0;  // counted where it is read (an unread one never runs)
            }
            long n = own(plan);
            for (Object child : CollectionConverters.asJava(plan.children())) {
                n = add(n, count((QueryPlan<?>) child));
            }
            for (Expression e : Gate.expressions(plan)) {
                if (e instanceof SubqueryExpression) {
                    n = add(n, count(((SubqueryExpression) e).plan()));
                }
            }
            if (plan instanceof CTERelationRef) {
                n = add(n, reference(((CTERelationRef) plan).cteId()));
            }
            return n;
        }

        /** A WITH query's partitions, once more for each place that reads it. */
        private long reference(long id) {
            LogicalPlan definition = definitions.get(id);
            if (definition == null || !open.add(id)) {
                return 0;  // unknown, or a reference to itself (recursive queries are refused anyway)
            }
            try {
                Long known = counted.get(id);
                if (known == null) {
                    known = count(definition);
                    counted.put(id, known);
                }
                return known;
            } finally {
                open.remove(id);
            }
        }

        private long own(QueryPlan<?> plan) {
            if (plan instanceof Range) {
                scala.Option<Object> slices = ((Range) plan).numSlices();
                return slices.isDefined() ? ((Number) slices.get()).longValue() : defaultSlices;
            }
            if (plan instanceof Repartition) {
                return ((Repartition) plan).numPartitions();
            }
            if (plan instanceof RepartitionByExpression) {
                return ((RepartitionByExpression) plan).numPartitions();
            }
            if (plan instanceof RebalancePartitions) {
                return ((RebalancePartitions) plan).numPartitions();
            }
            return 0;
        }

        private long add(long a, long b) {
            return Math.min(Long.MAX_VALUE / 2, a + b);
        }
    }
}
