package perflake.gate;

import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryPoolMXBean;
import java.lang.management.MemoryType;
import java.lang.management.MemoryUsage;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;

import javax.management.NotificationEmitter;
import javax.management.openmbean.CompositeData;

import com.sun.management.GarbageCollectionNotificationInfo;

import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerJobEnd;
import org.apache.spark.scheduler.SparkListenerJobStart;

/** Stops the running statements before the service's heap runs out.
 *
 * Spark accounts for the memory of its own sort, join and aggregation buffers, and spills
 * them to disk, but not for the objects some expressions build row by row: the buffer of
 * `collect_list` / `collect_set` / exact `percentile`, a row of `repeat(...)` strings.
 * Measured on the sandbox: `SELECT size(collect_list(repeat('x', 1000))) FROM range(0,
 * 10000000, 1, 1)` filled the service's 1 GB heap in about 80 s, and the OutOfMemoryErrors
 * landed on whichever threads allocated next: its client's connection, Spark's context
 * cleaner and heartbeat threads, the service's own watchdogs. The service still answered,
 * but without the threads that clean up after statements (for good: a thread an error
 * ends is not restarted).
 *
 * After every garbage collection this listener reads how much of the heap is still in use
 * (what the collection could not free). Past {@value #FRACTION} of the heap (default 0.8)
 * a thread of its own runs a full collection, and if the heap is still that full, cancels
 * every running job of the service with one sentence; the audit log says `out-of-memory`
 * with the jobs. A healthy service stays well below it (G1 starts collecting the old
 * generation at 45 %). Every running statement is stopped, not only the one that filled
 * the heap: what each statement holds is not known (Spark does not count it), and a wrong
 * guess would leave the heap full. A task that ignores its cancel (the `collect_list`
 * above did, and filled the heap 18 s later, which stopped the SparkContext once: the
 * listener bus's thread was among the dead) is stopped 0.5 s after the cancel
 * (RunawayTasks' Thread.stop), and RunawayTasks waits no grace for
 * any cancelled statement's thread for 30 s. Registered through spark.extraListeners on the
 * server only (local mode: the tasks share the service's heap). */
public final class MemoryGuard extends SparkListener {
    static final String FRACTION = "spark.perflake.gate.maxHeapFraction";
    private static final long HEED_NS = TimeUnit.MILLISECONDS.toNanos(500);  // for the cancelled tasks to end
    private static final long QUIET_NS = TimeUnit.SECONDS.toNanos(3);  // then for the heap to be collected

    private final double fraction;
    private final long maxHeap = Runtime.getRuntime().maxMemory();
    private final Set<String> heapPools = new HashSet<>();
    private final Set<Integer> runningJobs = ConcurrentHashMap.newKeySet();
    private final Semaphore pressure = new Semaphore(0);

    public MemoryGuard(SparkConf conf) {
        this.fraction = conf.getDouble(FRACTION, 0.8);
        if (fraction <= 0 || fraction >= 1 || maxHeap == Long.MAX_VALUE) {
            return;
        }
        for (MemoryPoolMXBean pool : ManagementFactory.getMemoryPoolMXBeans()) {
            if (pool.getType() == MemoryType.HEAP) {
                heapPools.add(pool.getName());
            }
        }
        for (GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans()) {
            if (gc instanceof NotificationEmitter) {
                ((NotificationEmitter) gc).addNotificationListener((notification, handback) -> {
                    if (GarbageCollectionNotificationInfo.GARBAGE_COLLECTION_NOTIFICATION.equals(notification.getType())) {
                        afterCollection((CompositeData) notification.getUserData());
                    }
                }, null, null);
            }
        }
        Thread t = new Thread(this::guard, "perflake-memory-guard");
        t.setDaemon(true);
        t.start();
    }

    @Override
    public void onJobStart(SparkListenerJobStart start) {
        runningJobs.add(start.jobId());
    }

    @Override
    public void onJobEnd(SparkListenerJobEnd end) {
        runningJobs.remove(end.jobId());
    }

    /** On the JVM's notification thread: only measure, and wake the guard. */
    private void afterCollection(CompositeData data) {
        long used = 0;
        for (Map.Entry<String, MemoryUsage> pool : GarbageCollectionNotificationInfo.from(data).getGcInfo()
                 .getMemoryUsageAfterGc().entrySet()) {
            if (heapPools.contains(pool.getKey())) {
                used += pool.getValue().getUsed();
            }
        }
        if (used > fraction * maxHeap) {
            pressure.release();
        }
    }

    private void guard() {
        while (true) {
            try {
                pressure.acquire();
                // What young collections cannot free may be old garbage, not a statement's
                // values: a full collection tells (measured: 969 MB after a young collection
                // once a stopped task's values were garbage).
                System.gc();
                long used = ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
                if (used <= fraction * maxHeap) {
                    pressure.drainPermits();
                    continue;
                }
                Map<Thread, String> tasks = RunawayTasks.taskThreads();
                stopRunningJobs(used);
                Thread.sleep(TimeUnit.NANOSECONDS.toMillis(HEED_NS));
                // Whatever still runs the task it ran at the cancel is stopped, whatever the
                // collections read since: once the heap read under the limit just after the
                // cancel, the task was left running, and it filled the heap 2 s later, ending
                // the listener bus's thread, which stopped the SparkContext (measured, in
                // the fast tier).
                RunawayTasks.stopTaskThreads(tasks, "its statement was cancelled to free the heap");
                Thread.sleep(TimeUnit.NANOSECONDS.toMillis(QUIET_NS));
                pressure.drainPermits();  // the collections that saw the same pressure
            } catch (Throwable e) {  // nothing ends the guard, an OutOfMemoryError least of all
                try {
                    System.err.println("perflake memory guard: " + e);
                } catch (Throwable ignored) {
                }
            }
        }
    }

    /** Cancel every running job; `used`: the heap in use after the full collection. */
    private void stopRunningJobs(long used) {
        String reason = String.format("perflake stopped this statement: the SQL service's memory was %d%% full "
                                      + "(%,d of %,d MB after garbage collection, over its limit of %d%%, %s), and "
                                      + "every statement running then was stopped; aggregate into fewer or smaller "
                                      + "values (collect_list, collect_set and exact percentiles keep every value in "
                                      + "memory), narrow it, and run it again",
                                      100 * used / maxHeap, used >> 20, maxHeap >> 20,
                                      Math.round(100 * fraction), FRACTION);
        RunawayTasks.hurry(30);  // a cancelled statement's own thread, too, may hold the heap
        SparkContext sc = SparkContext.getOrCreate();  // the service's own, running
        StringBuilder jobs = new StringBuilder();
        for (Integer job : runningJobs) {
            sc.cancelJob(job, reason);
            jobs.append(jobs.length() == 0 ? "" : ",").append(job);
        }
        Audit.write("out-of-memory", "used_mb", String.valueOf(used >> 20), "max_mb",
                    String.valueOf(maxHeap >> 20), "jobs", jobs.toString());
    }
}
