package perflake.gate;

import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;

/** The SQL service's limit on every statement, JDBC and Spark Connect alike (Spark setting
 * {@value #SETTING}, seconds; 0: none), and the one sentence a client whose statement
 * outlived it reads. JdbcTimeout and ConnectTimeout enforce it. */
final class StatementTimeout {
    static final String SETTING = "spark.perflake.gate.statementTimeout";
    static final String PREFIX = "perflake stopped this statement: it timed out after ";
    private static volatile long seconds = -1;  // -1: not read yet (the service's conf comes with SparkEnv)

    private StatementTimeout() {}

    /** The limit in seconds (0: none), or -1 while the service's configuration is not there yet. */
    static long seconds() {
        if (seconds < 0) {
            SparkEnv env = SparkEnv.get();
            if (env != null) {
                seconds = read(env.conf());
            }
        }
        return seconds;
    }

    static long read(SparkConf conf) {
        return conf.getTimeAsSeconds(SETTING, "0");
    }

    static String sentence() {
        return PREFIX + seconds() + " s, the SQL service's limit for every statement (" + SETTING + "); narrow it "
               + "(filter on dt or pool, aggregate, or add a LIMIT) and run it again.";
    }
}
