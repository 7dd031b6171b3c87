package perflake.gate;

import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

import org.apache.spark.SparkConf;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerJobEnd;
import org.apache.spark.scheduler.SparkListenerJobStart;
import org.apache.spark.scheduler.SparkListenerStageCompleted;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.scheduler.SparkListenerTaskStart;

import scala.jdk.javaapi.CollectionConverters;

/** Threads that outlive their statement: stopped, so that a cancelled statement gives its
 * cores back.
 *
 * A statement is cancelled (its timeout, a client's cancel, ScratchBound) by interrupting
 * its threads: its tasks' and its own (HiveServer2's background thread, Spark Connect's
 * execute thread). Spark's code looks for the interrupt between rows; an expression that
 * spends one row in a loop of its own never looks. Measured on the 2-core sandbox:
 * `levenshtein` of two 1.2-million-character strings kept a core busy for minutes after
 * the service had timed its statement out and told the client so (one row can take days),
 * so two such statements held both of the service's task slots (local[2]) and every later
 * statement of every user timed out behind them. Java's regular expressions on a hostile
 * pattern and nested higher-order functions over `sequence(...)` do the same, and so does
 * the optimizer folding such an expression over literals, on the statement's own thread.
 *
 * Two kinds of thread are watched, once a second, by a daemon thread:
 * - a task whose stage has ended in failure (a cancelled statement's stages do) while the
 *   task still runs: this listener remembers which tasks run;
 * - a statement's own thread that has been interrupted and is still computing.
 * Either still at it GRACE later (Spark setting {@value #GRACE}, default 20 s) is stopped
 * with Thread.stop (a ThreadDeath thrown into it), the only means the JVM has to end a
 * thread that ignores interrupts. A task then fails as any failed task does (Spark's task
 * runner releases its memory and locks; spark.executor.killOnFatalError.depth=0 keeps the
 * error from ending the service); a statement thread fails its statement, which has
 * failed already. Only a thread caught computing is stopped (see holdsState): one inside
 * Spark's storage, shuffle or memory code, or in I/O, may hold the service's shared state
 * and is left for the next look. The audit log says `runaway-stopped`. Thread.stop works on
 * Java 17-19 (the service's Java here); from Java 20 it throws, and the audit log then says
 * `runaway-unstoppable` once per thread. Registered through spark.extraListeners on the SQL
 * server only, where tasks run in the service's own JVM (local mode). */
public final class RunawayTasks extends SparkListener {
    static final String GRACE = "spark.perflake.gate.runawayGraceSeconds";
    static final String DEFAULT_GRACE = "20s";
    private static final String EXECUTION = "spark.sql.execution.root.id";
    private static final String EXECUTION_FALLBACK = "spark.sql.execution.id";
    /** Stack frames of code that may hold the service's shared state: not stopped there. */
    private static final String[] HOLDS_STATE = {
        "org.apache.spark.storage.", "org.apache.spark.shuffle.", "org.apache.spark.memory.",
        "org.apache.spark.broadcast.", "org.apache.spark.util.collection.", "org.apache.hadoop.",
        "org.apache.parquet.", "java.io.", "java.nio.", "sun.nio.", "java.util.concurrent.",
        "java.lang.ClassLoader", "jdk.internal.loader.", "org.apache.spark.executor.",
    };
    /** Stack frames of one row's computation: stopped there. */
    private static final String[] COMPUTES = {
        "org.apache.spark.sql.catalyst.", "org.apache.spark.unsafe.", "java.util.regex.",
    };

    private final long graceNs;
    /** When each thread was last stopped (System.nanoTime): never again within AGAIN_NS.
     * Measured: a task thread stopped twice within a second (by MemoryGuard, then by the
     * watchdog) left the service's task slots stuck, and every later statement timed out. */
    private static final Map<Thread, Long> LAST_STOP = new ConcurrentHashMap<>();
    private static final long AGAIN_NS = TimeUnit.SECONDS.toNanos(10);
    /** Until when (System.nanoTime) the grace is none: MemoryGuard's `hurry`. */
    private static volatile long hurryUntilNs = System.nanoTime();
    private final Map<Integer, String> stageExecution = new ConcurrentHashMap<>(); // stage -> SQL execution
    private final Map<Integer, List<Object>> jobStages = new ConcurrentHashMap<>(); // running job -> its stages
    private final Map<Long, Task> running = new ConcurrentHashMap<>();             // task id -> what it is
    private final Map<Long, Long> interruptedSince = new ConcurrentHashMap<>();    // statement thread -> first seen
    private final Set<Long> unstoppable = ConcurrentHashMap.newKeySet();           // said so once already

    /** A running task, and when its stage ended under it (System.nanoTime; 0 while it has not). */
    private static final class Task {
        final int stage;
        final String execution;
        volatile long abandonedAt;
        volatile boolean reported;

        Task(int stage, String execution) {
            this.stage = stage;
            this.execution = execution;
        }
    }

    public RunawayTasks(SparkConf conf) {
        this.graceNs = TimeUnit.SECONDS.toNanos(conf.getTimeAsSeconds(GRACE, DEFAULT_GRACE));
        Watchdog.everySecond("perflake-runaway-tasks", this::tick);
    }

    @Override
    public void onJobStart(SparkListenerJobStart start) {
        String execution = executionOf(start.properties());
        List<Object> stages = CollectionConverters.asJava(start.stageIds());
        jobStages.put(start.jobId(), stages);
        for (Object stage : stages) {
            stageExecution.put((Integer) stage, execution == null ? "" : execution);
        }
    }

    /** A job's stages that never ran (skipped: their shuffle output was there already) get
     * no completion event: forgotten with the job, as the service runs for months. */
    @Override
    public void onJobEnd(SparkListenerJobEnd end) {
        List<Object> stages = jobStages.remove(end.jobId());
        if (stages != null) {
            stages.forEach(stageExecution::remove);
        }
    }

    @Override
    public void onTaskStart(SparkListenerTaskStart start) {
        running.put(start.taskInfo().taskId(),
                    new Task(start.stageId(), stageExecution.getOrDefault(start.stageId(), "")));
    }

    @Override
    public void onTaskEnd(SparkListenerTaskEnd end) {
        running.remove(end.taskInfo().taskId());
    }

    @Override
    public void onStageCompleted(SparkListenerStageCompleted completed) {
        int stage = completed.stageInfo().stageId();
        stageExecution.remove(stage);
        if (completed.stageInfo().failureReason().isEmpty()) {
            return;
        }
        long now = System.nanoTime();
        for (Task task : running.values()) {
            if (task.stage == stage && task.abandonedAt == 0) {
                task.abandonedAt = now;
            }
        }
    }

    /** The heap is nearly full (MemoryGuard): for the next `seconds`, a cancelled statement's
     * threads get no grace, since a task that fills the heap and ignores its cancel would
     * run the service out of memory long before the grace ends (measured). */
    static void hurry(long seconds) {
        hurryUntilNs = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
    }

    private void tick() {
        long now = System.nanoTime();
        long graceNs = now - hurryUntilNs < 0 ? 0 : this.graceNs;
        Map<Thread, StackTraceElement[]> threads = null;
        for (Map.Entry<Long, Task> entry : running.entrySet()) {
            Task task = entry.getValue();
            if (task.abandonedAt == 0 || now - task.abandonedAt < graceNs) {
                continue;
            }
            if (threads == null) {
                threads = Thread.getAllStackTraces();
            }
            stopTask(entry.getKey(), task, threads, now);
        }
        stopStatementThreads(now, graceNs);
    }

    private void stopTask(long taskId, Task task, Map<Thread, StackTraceElement[]> threads, long now) {
        String suffix = "(TID " + taskId + ")";  // Spark's name for a task's thread ends so
        for (Map.Entry<Thread, StackTraceElement[]> t : threads.entrySet()) {
            Thread thread = t.getKey();
            if (thread.getName().endsWith(suffix) && thread.getState() == Thread.State.RUNNABLE
                && !holdsState(t.getValue())) {
                String seconds = String.valueOf(TimeUnit.NANOSECONDS.toSeconds(now - task.abandonedAt));
                if (stop(thread, t.getValue(), !task.reported, "execution", task.execution, "stage",
                         String.valueOf(task.stage), "task", String.valueOf(taskId), "seconds", seconds)) {
                    task.abandonedAt = now;  // if it is still running at the next grace, look again
                } else {
                    task.reported = true;
                }
                return;
            }
        }
    }

    /** A statement's own thread (HiveServer2's, Spark Connect's) that its cancel interrupted
     * and that computes on regardless: the optimizer folds constant expressions on it
     * (measured: `SELECT levenshtein(repeat('gemm', 300000), repeat('gemmx', 300000))` kept
     * a HiveServer2 thread at a full core after its timeout), with no task to cancel.
     * Stopped once it has been seen interrupted, runnable and computing for GRACE. */
    private void stopStatementThreads(long now, long graceNs) {
        ThreadGroup root = Thread.currentThread().getThreadGroup();
        while (root.getParent() != null) {
            root = root.getParent();
        }
        Thread[] all = new Thread[root.activeCount() * 2 + 16];
        int n = root.enumerate(all, true);
        Set<Long> seen = new HashSet<>();
        for (int i = 0; i < n; i++) {
            Thread thread = all[i];
            if (!isStatementThread(thread) || !thread.isInterrupted()
                || thread.getState() != Thread.State.RUNNABLE) {
                continue;
            }
            StackTraceElement[] stack = thread.getStackTrace();
            if (holdsState(stack)) {
                continue;
            }
            long id = thread.getId();
            seen.add(id);
            long since = interruptedSince.computeIfAbsent(id, k -> now);
            if (now - since < graceNs) {
                continue;
            }
            String seconds = String.valueOf(TimeUnit.NANOSECONDS.toSeconds(now - since));
            if (stop(thread, stack, !unstoppable.contains(id), "thread", thread.getName(), "seconds", seconds)) {
                interruptedSince.put(id, now);  // if it is still running at the next grace, look again
            } else {
                unstoppable.add(id);
            }
        }
        interruptedSince.keySet().retainAll(seen);
        unstoppable.retainAll(seen);
    }

    private static boolean isStatementThread(Thread thread) {
        String name = thread.getName();
        return name.startsWith("HiveServer2-Background-Pool") || name.startsWith("SparkConnectExecuteThread")
               || Analyses.running(thread);
    }

    /** The service's task threads now, with their names (Spark names a task's thread after
     * the task, and renames it for the next). */
    static Map<Thread, String> taskThreads() {
        Map<Thread, String> tasks = new HashMap<>();
        for (Thread thread : Thread.getAllStackTraces().keySet()) {
            if (thread.getName().startsWith("Executor task launch worker")) {
                tasks.put(thread, thread.getName());
            }
        }
        return tasks;
    }

    /** Stop each of `tasks` (taskThreads) still running the same task and computing, with
     * no grace: MemoryGuard's last resort when the heap stays full after its cancels. */
    static void stopTaskThreads(Map<Thread, String> tasks, String reason) {
        for (Map.Entry<Thread, String> task : tasks.entrySet()) {
            Thread thread = task.getKey();
            StackTraceElement[] stack = thread.getStackTrace();
            if (thread.getName().equals(task.getValue()) && thread.getState() == Thread.State.RUNNABLE
                && !holdsState(stack)) {
                stop(thread, stack, true, "thread", task.getValue(), "reason", reason);
            }
        }
    }

    /** Stop `thread` and say so in the audit log; false where this Java has no Thread.stop
     * (said once, where `report`). */
    @SuppressWarnings({"deprecation", "removal"})
    private static synchronized boolean stop(Thread thread, StackTraceElement[] stack, boolean report,
                                             String... fields) {
        long now = System.nanoTime();
        Long last = LAST_STOP.get(thread);
        if (last != null && now - last < AGAIN_NS) {
            return true;  // stopped already: a second ThreadDeath could land in Spark's cleanup of the first
        }
        LAST_STOP.values().removeIf(at -> now - at > AGAIN_NS);
        LAST_STOP.put(thread, now);
        try {
            thread.stop();
        } catch (UnsupportedOperationException e) {
            if (report) {
                Audit.write("runaway-unstoppable", with(fields, "reason",
                            "this Java has no Thread.stop; the thread keeps its core until its work ends"));
            }
            return false;
        }
        Audit.write("runaway-stopped", with(fields, "at", top(stack)));
        return true;
    }

    private static String[] with(String[] fields, String key, String value) {
        String[] out = Arrays.copyOf(fields, fields.length + 2);
        out[fields.length] = key;
        out[fields.length + 1] = value;
        return out;
    }

    /** Where the thread is now, judged from its innermost frame outwards: the first frame of
     * state-holding code (storage, shuffle, memory, I/O, locks) says wait; the first frame of
     * row computation (expressions, generated code, Spark's string and array code, regular
     * expressions) says stop. A shuffle writer or a cached block further out holds no lock
     * that the task runner does not release when the task fails. */
    private static boolean holdsState(StackTraceElement[] stack) {
        for (StackTraceElement frame : stack) {
            String name = frame.getClassName();
            for (String prefix : COMPUTES) {
                if (name.startsWith(prefix) || name.contains("GeneratedClass")) {
                    return false;
                }
            }
            for (String prefix : HOLDS_STATE) {
                if (name.startsWith(prefix)) {
                    return true;
                }
            }
        }
        return true;  // no row computation in sight: leave it
    }

    private static String top(StackTraceElement[] stack) {
        return stack.length == 0 ? "" : stack[0].getClassName() + "." + stack[0].getMethodName();
    }

    private static String executionOf(Properties properties) {
        if (properties == null) {
            return null;
        }
        String root = properties.getProperty(EXECUTION);
        return root != null ? root : properties.getProperty(EXECUTION_FALLBACK);
    }
}
