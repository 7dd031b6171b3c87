package perflake.gate;

import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.apache.spark.executor.TaskMetrics;
import org.apache.spark.scheduler.AccumulableInfo;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerExecutorMetricsUpdate;
import org.apache.spark.scheduler.SparkListenerEvent;
import org.apache.spark.scheduler.SparkListenerJobEnd;
import org.apache.spark.scheduler.SparkListenerJobStart;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd;
import org.apache.spark.util.AccumulatorContext;
import org.apache.spark.util.AccumulatorV2;

import scala.Tuple4;
import scala.jdk.javaapi.CollectionConverters;

/** How much one statement may write to the service's scratch disk (spark.local.dir).
 *
 * A statement's shuffles and spills are files on the service's own disk, and Spark puts no
 * bound on them: measured on the 2-core sandbox, one `count(DISTINCT ...)` over a large
 * range wrote 5 GB in its 120 s (about 43 MB/s per core, for the 300 s of the default
 * timeout and every core of a larger host), and a disk filled by it fails the pipeline's
 * own writes to the lake beside it. The files go when the statement ends; this listener
 * ends it first: the bytes each task has written to shuffle files and spilled to disk, as
 * executors report them (their heartbeats, every few seconds while a task runs, and the
 * task's end), are summed per SQL execution (one statement, with all its jobs), and the
 * statement's jobs are cancelled when the sum passes DEFAULT_MAX_BYTES (Spark setting
 * {@value #MAX_BYTES}). The statement then fails with the reason, and the audit log says
 * so. Registered through spark.extraListeners on the SQL server only. */
public final class ScratchBound extends SparkListener {
    static final String MAX_BYTES = "spark.perflake.gate.maxScratchBytes";
    static final String DEFAULT_MAX_BYTES = "10g";
    private static final String SHUFFLE_WRITTEN = "internal.metrics.shuffle.write.bytesWritten";
    private static final String SPILLED = "internal.metrics.diskBytesSpilled";
    private static final String EXECUTION = "spark.sql.execution.root.id";
    private static final String EXECUTION_FALLBACK = "spark.sql.execution.id";

    private final long maxBytes;
    private final Map<Integer, String> stageExecution = new ConcurrentHashMap<>();  // stage -> execution
    private final Map<Integer, String> jobExecution = new ConcurrentHashMap<>();    // running job -> execution
    private final Map<String, Map<Long, Long>> written = new ConcurrentHashMap<>(); // execution -> task -> bytes
    private final Map<String, Long> totals = new ConcurrentHashMap<>();             // execution -> bytes
    private final Set<String> stopped = ConcurrentHashMap.newKeySet();

    public ScratchBound(SparkConf conf) {
        this.maxBytes = conf.getSizeAsBytes(MAX_BYTES, DEFAULT_MAX_BYTES);
    }

    @Override
    public void onJobStart(SparkListenerJobStart start) {
        String execution = executionOf(start.properties());
        if (execution == null) {
            return;  // not a SQL statement
        }
        jobExecution.put(start.jobId(), execution);
        for (Object stage : CollectionConverters.asJava(start.stageIds())) {
            stageExecution.put((Integer) stage, execution);
        }
    }

    @Override
    public void onExecutorMetricsUpdate(SparkListenerExecutorMetricsUpdate update) {
        for (Tuple4<Object, Object, Object, scala.collection.immutable.Seq<AccumulableInfo>> task
                 : CollectionConverters.asJava(update.accumUpdates())) {
            long bytes = 0;
            for (AccumulableInfo info : CollectionConverters.asJava(task._4())) {
                if (info.update().isDefined() && counted(info)) {
                    bytes += ((Number) info.update().get()).longValue();
                }
            }
            record((Integer) task._2(), (Long) task._1(), bytes);
        }
    }

    /** Is this one of the two metrics counted? Heartbeats carry accumulators by id, without
     * their names: the driver's registry of live accumulators has them (a lookup in a map;
     * not cached here, as every stage brings new ids and the service runs for months). */
    private static boolean counted(AccumulableInfo info) {
        scala.Option<String> name = info.name().isDefined() ? info.name()
            : AccumulatorContext.get(info.id()).flatMap(AccumulatorV2::name);
        return name.isDefined() && (SHUFFLE_WRITTEN.equals(name.get()) || SPILLED.equals(name.get()));
    }

    @Override
    public void onTaskEnd(SparkListenerTaskEnd end) {
        TaskMetrics m = end.taskMetrics();
        if (m != null) {
            record(end.stageId(), end.taskInfo().taskId(), m.shuffleWriteMetrics().bytesWritten() + m.diskBytesSpilled());
        }
    }

    @Override
    public void onJobEnd(SparkListenerJobEnd end) {
        jobExecution.remove(end.jobId());
    }

    /** A statement's count lasts until it ends: all its jobs (adaptive execution runs one
     * per stage) write to the same disk. */
    @Override
    public void onOtherEvent(SparkListenerEvent event) {
        if (event instanceof SparkListenerSQLExecutionEnd) {
            String execution = String.valueOf(((SparkListenerSQLExecutionEnd) event).executionId());
            written.remove(execution);
            totals.remove(execution);
            stopped.remove(execution);
            stageExecution.values().removeIf(execution::equals);
        }
    }

    private void record(int stage, long task, long bytes) {
        String execution = stageExecution.get(stage);
        if (execution == null || bytes <= 0) {
            return;
        }
        Map<Long, Long> tasks = written.computeIfAbsent(execution, e -> new ConcurrentHashMap<>());
        Long before = tasks.get(task);  // a task's figures only grow: count what it added
        if (before != null && before >= bytes) {
            return;
        }
        tasks.put(task, bytes);
        long total = totals.merge(execution, bytes - (before == null ? 0 : before), Long::sum);
        if (total > maxBytes && stopped.add(execution)) {
            stop(execution, total);
        }
    }

    private void stop(String execution, long total) {
        String reason = String.format("perflake stopped this statement: it wrote %,d MB of shuffle and spill files to "
                                      + "the SQL service's scratch disk, over the limit of %,d MB for one statement "
                                      + "(%s); narrow it (filter on dt or pool, aggregate before joining) and run it "
                                      + "again", total >> 20, maxBytes >> 20, MAX_BYTES);
        Audit.write("over-scratch", "execution", execution, "bytes", String.valueOf(total));
        SparkContext sc = SparkContext.getOrCreate();  // the service's own, running
        for (Map.Entry<Integer, String> job : jobExecution.entrySet()) {
            if (execution.equals(job.getValue())) {
                sc.cancelJob(job.getKey(), reason);
            }
        }
    }

    private static String executionOf(Properties properties) {
        if (properties == null) {
            return null;
        }
        String root = properties.getProperty(EXECUTION);
        return root != null ? root : properties.getProperty(EXECUTION_FALLBACK);
    }
}
