package perflake.gate;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Deque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.spark.SparkEnv;
import org.apache.spark.connect.proto.Plan;
import org.apache.spark.sql.catalyst.parser.CatalystSqlParser$;
import org.apache.spark.sql.connect.utils.PlanCompressionUtils$;
import org.sparkproject.connect.protobuf.ByteString;
import org.sparkproject.connect.protobuf.Descriptors.Descriptor;
import org.sparkproject.connect.protobuf.Descriptors.EnumValueDescriptor;
import org.sparkproject.connect.protobuf.Descriptors.FieldDescriptor;
import org.sparkproject.connect.protobuf.Descriptors.FileDescriptor;
import org.sparkproject.connect.protobuf.Message;

/** What the Spark Connect guard refuses in a request, judged on the parsed protobuf
 * message (never on text): every message and field of the tree is visited, compressed
 * plans decompressed as Spark's planner would, before the planner turns any of it into a
 * Spark plan. Code, caches, files reached while a plan is built and whole subsystems the
 * read-only service has no use for are refused with one sentence; everything else goes
 * on to the planner, the analyzer and the gate. Extension messages (google.protobuf.Any)
 * stay opaque: the service registers no Connect extensions, so the planner refuses them. */
final class ConnectRules {
    private static final String NO_CODE = "runs code inside the service, and " + Gate.SCOPE;
    private static final String FILLS_CACHE = "would fill the service's memory and scratch disk, which all its users "
                                              + "share, and " + Gate.SCOPE;
    private static final String CHANGES_CACHE = "changes the cache that all the service's users share, and "
                                                + Gate.SCOPE;
    private static final String STREAMING = "runs on the service until stopped and writes to its sinks, and "
                                            + Gate.SCOPE;

    /** Message types refused wherever they sit in a request, by full protobuf name. */
    private static final Map<String, String[]> TYPES = new HashMap<>();
    /** Fields refused when set (oneof cases: a call, a command, a relation), by full name. */
    private static final Map<String, String[]> FIELDS = new HashMap<>();

    static {
        TYPES.put("spark.connect.ScalarScalaUDF", new String[] {"a Scala user-defined function",
            "carries Java-serialised code that the service would deserialise and run, and " + Gate.SCOPE});
        TYPES.put("spark.connect.JavaUDF", new String[] {"a Java user-defined function",
            "names a class for the service to load and run, and " + Gate.SCOPE});
        TYPES.put("spark.connect.PythonUDF", new String[] {"a Python user-defined function", NO_CODE});
        TYPES.put("spark.connect.PythonUDTF", new String[] {"a Python user-defined table function", NO_CODE});
        TYPES.put("spark.connect.PythonDataSource", new String[] {"a Python data source", NO_CODE});
        TYPES.put("spark.connect.DataType.UDT", new String[] {"a user-defined type",
            "names classes for the service to load, and " + Gate.SCOPE});

        FIELDS.put("spark.connect.Catalog.cache_table", new String[] {"catalog.cacheTable", FILLS_CACHE});
        FIELDS.put("spark.connect.AnalyzePlanRequest.persist", new String[] {"DataFrame.cache/persist", FILLS_CACHE});
        FIELDS.put("spark.connect.Command.checkpoint_command", new String[] {"DataFrame.checkpoint/localCheckpoint",
            FILLS_CACHE});
        FIELDS.put("spark.connect.Catalog.uncache_table", new String[] {"catalog.uncacheTable", CHANGES_CACHE});
        FIELDS.put("spark.connect.Catalog.clear_cache", new String[] {"catalog.clearCache", CHANGES_CACHE});
        FIELDS.put("spark.connect.Catalog.refresh_table", new String[] {"catalog.refreshTable", CHANGES_CACHE});
        FIELDS.put("spark.connect.Catalog.refresh_by_path", new String[] {"catalog.refreshByPath", CHANGES_CACHE});
        FIELDS.put("spark.connect.AnalyzePlanRequest.unpersist", new String[] {"DataFrame.unpersist",
            CHANGES_CACHE});
        FIELDS.put("spark.connect.Command.remove_cached_remote_relation_command", new String[] {
            "removing a DataFrame cached on the service", CHANGES_CACHE});
        FIELDS.put("spark.connect.Relation.cached_remote_relation", new String[] {"a DataFrame cached on the service",
            "is held in the service's memory, which all its users share, and " + Gate.SCOPE});
        FIELDS.put("spark.connect.Read.data_source", new String[] {
            "reading a data source by format, path or URL (spark.read.format, load, parquet, jdbc)",
            "reaches files or other systems while the plan is built, before the gate can judge it, and "
            + Gate.SCOPE});
        // spark.conf.set: the gate refuses every statement of a session whose settings differ
        // from the service's, but a DataFrame read is analysed without being parsed, and its
        // analysis lists the table's files with the session's Hadoop settings (measured:
        // fs.file.impl set this way was loaded and instantiated before the gate judged the plan)
        FIELDS.put("spark.connect.ConfigRequest.Operation.set", new String[] {
            "changing a setting of the session (spark.conf.set)",
            "reaches the session's file readers while a plan is analysed, before the gate judges it (Hadoop and "
            + "Parquet settings name classes to load), and configuration changes are not allowed on this endpoint"});
        // a table read with options of its own (spark.read.option(k, v).table(t)): they reach the
        // file readers while the plan is analysed (listing the table's files), before the gate's
        // check of the analyzed plan, which refuses them too
        FIELDS.put("spark.connect.Read.NamedTable.options", new String[] {
            "reading a table with options (spark.read.option(...).table)", Gate.READ_OPTIONS});
        FIELDS.put("spark.connect.Command.execute_external_command", new String[] {
            "an external command (spark.executeCommand)", "runs a command in another system from the service, and "
            + Gate.SCOPE});
        // Spark ML, but for emptying the session's own model cache, which pyspark's client
        // sends at exit: new ML commands of a later Spark are refused without a change here.
        String[] ml = new String[] {"Spark ML",
            "reads and writes models by path and keeps them in the service's memory, and " + Gate.SCOPE};
        for (FieldDescriptor f : org.apache.spark.connect.proto.MlCommand.getDescriptor().getFields()) {
            if (!f.getName().equals("clean_cache") && !f.getName().equals("get_cache_info")) {
                FIELDS.put(f.getFullName(), ml);
            }
        }
        FIELDS.put("spark.connect.Relation.ml_relation", ml);
        FIELDS.put("spark.connect.Command.pipeline_command", new String[] {"a declarative pipeline",
            "defines and runs flows that write tables, and " + Gate.SCOPE});
        for (String f : Arrays.asList("write_stream_operation_start", "streaming_query_command",
                                      "streaming_query_manager_command", "streaming_query_listener_bus_command")) {
            FIELDS.put("spark.connect.Command." + f, new String[] {"a streaming query", STREAMING});
        }
        checkNamesExist();
    }

    private ConnectRules() {}

    /** The refusal of a request message, one sentence, or null if the guard lets it
     * through to the planner (where the gate judges what becomes a plan). */
    static String judge(Message request) {
        Deque<Message> todo = new ArrayDeque<>();
        todo.push(request);
        while (!todo.isEmpty()) {
            Message m = todo.pop();
            Descriptor type = m.getDescriptorForType();
            String[] refused = TYPES.get(type.getFullName());
            if (refused != null) {
                return sentence(refused);
            }
            String function = functionRefusal(m, type.getFullName());
            if (function != null) {
                return function;
            }
            if (m instanceof Plan && ((Plan) m).getOpTypeCase() == Plan.OpTypeCase.COMPRESSED_OPERATION) {
                try {
                    todo.push(decompressed((Plan) m));
                } catch (RuntimeException e) {
                    return sentence(new String[] {"a compressed plan that cannot be decompressed",
                        "cannot be judged, and " + Gate.SCOPE});
                }
                continue;
            }
            for (Map.Entry<FieldDescriptor, Object> field : m.getAllFields().entrySet()) {
                refused = FIELDS.get(field.getKey().getFullName());
                if (refused != null) {
                    return sentence(refused);
                }
                if (field.getKey().getJavaType() == FieldDescriptor.JavaType.MESSAGE) {
                    for (Object child : values(field.getKey(), field.getValue())) {
                        todo.push((Message) child);
                    }
                }
            }
        }
        return null;
    }

    /** A compressed plan as the planner will read it (Spark's own code, within its bound
     * on the size); any other plan as it is. */
    static Plan decompressed(Plan plan) {
        return plan.getOpTypeCase() == Plan.OpTypeCase.COMPRESSED_OPERATION
            ? PlanCompressionUtils$.MODULE$.decompressPlan(plan) : plan;
    }

    /** A function called by name (F.reflect, F.call_function) is judged by the gate's own
     * rule for names, as the planner will resolve it: before analysis, which would already
     * load the class that reflect names. */
    private static String functionRefusal(Message m, String type) {
        boolean udf = type.equals("spark.connect.Expression.UnresolvedFunction");
        if (!udf && !type.equals("spark.connect.CallFunction")) {
            return null;
        }
        String name = (String) m.getField(m.getDescriptorForType().findFieldByName("function_name"));
        FieldDescriptor userDefined = m.getDescriptorForType().findFieldByName("is_user_defined_function");
        List<String> parts = new ArrayList<>();
        if (udf && !Boolean.TRUE.equals(m.getField(userDefined))) {
            parts.add(name);  // the planner looks up the whole name as one built-in
        } else {
            try {
                parts.addAll(Gate.parts(CatalystSqlParser$.MODULE$.parseMultipartIdentifier(name)));
            } catch (Exception e) {
                return null;  // the planner's parser refuses it the same way
            }
        }
        List<?> args = (List<?>) m.getField(m.getDescriptorForType().findFieldByName("arguments"));
        try {
            Gate.judgeFunctionName(parts);
            Gate.judgeTypeArgument(parts, args.size(), i -> typeArgument((Message) args.get(i)),
                                   new StatementBounds(SparkEnv.get().conf()));
        } catch (Exception e) {
            if (e instanceof Refusal) {
                return ((Refusal) e).getMessage();
            }
            throw e;
        }
        return null;
    }

    /** A Connect argument (an Expression message) as Gate.judgeTypeArgument sees it: a
     * string literal's text, the name of a function called there, or null. */
    private static Object typeArgument(Message expr) {
        for (Map.Entry<FieldDescriptor, Object> field : expr.getAllFields().entrySet()) {
            String kind = field.getKey().getName();
            Message value = field.getValue() instanceof Message ? (Message) field.getValue() : null;
            if (kind.equals("literal") && value != null) {
                FieldDescriptor string = value.getDescriptorForType().findFieldByName("string");
                return value.hasField(string) ? (String) value.getField(string) : null;
            }
            if (kind.equals("unresolved_function") && value != null) {
                String name = (String) value.getField(value.getDescriptorForType().findFieldByName("function_name"));
                return new Gate.FunctionCall(name.toLowerCase(java.util.Locale.ROOT));
            }
        }
        return null;
    }

    private static List<?> values(FieldDescriptor field, Object value) {
        return field.isRepeated() ? (List<?>) value : Arrays.asList(value);
    }

    private static String sentence(String[] whatWhy) {
        return Refusal.PREFIX + whatWhy[0] + " " + whatWhy[1] + ".";
    }

    /** The request's self-declared user (user_context.user_id) and its session id, for the
     * audit log: whatever the client sent, "" where absent. */
    static String[] userAndSession(Message request) {
        Descriptor type = request.getDescriptorForType();
        String user = "";
        FieldDescriptor context = type.findFieldByName("user_context");
        if (context != null && request.hasField(context)) {
            Message ctx = (Message) request.getField(context);
            FieldDescriptor id = ctx.getDescriptorForType().findFieldByName("user_id");
            user = id == null ? "" : String.valueOf(ctx.getField(id));
        }
        FieldDescriptor session = type.findFieldByName("session_id");
        return new String[] {user, session == null ? "" : String.valueOf(request.getField(session))};
    }

    /** A plan as one compact line for the audit log: set fields by name, strings quoted
     * (so a SQL statement reads as itself), bytes by their size; cut at `limit` characters. */
    static String describe(Message m, int limit) {
        StringBuilder out = new StringBuilder();
        describe(m, out, limit);
        return out.length() > limit ? out.substring(0, limit) + "..." : out.toString();
    }

    private static void describe(Message m, StringBuilder out, int limit) {
        boolean first = true;
        for (Map.Entry<FieldDescriptor, Object> field : m.getAllFields().entrySet()) {
            for (Object v : values(field.getKey(), field.getValue())) {
                if (out.length() > limit) {
                    return;
                }
                out.append(first ? "" : " ").append(field.getKey().getName());
                first = false;
                if (v instanceof Message) {
                    out.append("{");
                    describe((Message) v, out, limit);
                    out.append("}");
                } else if (v instanceof String) {
                    out.append(":'").append((String) v).append("'");
                } else if (v instanceof ByteString) {
                    out.append(":<").append(((ByteString) v).size()).append(" bytes>");
                } else if (v instanceof EnumValueDescriptor) {
                    out.append(":").append(((EnumValueDescriptor) v).getName());
                } else {
                    out.append(":").append(v);
                }
            }
        }
    }

    /** Every name in the tables is a type or field of this Spark's protocol: a rename in a
     * later Spark fails the service's start instead of silently letting a call through. */
    private static void checkNamesExist() {
        List<FileDescriptor> files = Arrays.asList(
            org.apache.spark.connect.proto.Base.getDescriptor(), org.apache.spark.connect.proto.Relations.getDescriptor(),
            org.apache.spark.connect.proto.Commands.getDescriptor(),
            org.apache.spark.connect.proto.Expressions.getDescriptor(),
            org.apache.spark.connect.proto.CatalogOuterClass.getDescriptor(),
            org.apache.spark.connect.proto.Types.getDescriptor(), org.apache.spark.connect.proto.Ml.getDescriptor());
        Map<String, Descriptor> types = new HashMap<>();
        Deque<Descriptor> todo = new ArrayDeque<>();
        for (FileDescriptor f : files) {
            todo.addAll(f.getMessageTypes());
        }
        while (!todo.isEmpty()) {
            Descriptor d = todo.pop();
            types.put(d.getFullName(), d);
            todo.addAll(d.getNestedTypes());
        }
        for (String t : TYPES.keySet()) {
            if (!types.containsKey(t)) {
                throw new IllegalStateException("perflake's Connect guard names " + t + ", which this Spark's "
                                                + "Connect protocol does not define: update ConnectRules");
            }
        }
        for (String f : FIELDS.keySet()) {
            int dot = f.lastIndexOf('.');
            Descriptor owner = types.get(f.substring(0, dot));
            if (owner == null || owner.findFieldByName(f.substring(dot + 1)) == null) {
                throw new IllegalStateException("perflake's Connect guard names " + f + ", which this Spark's "
                                                + "Connect protocol does not define: update ConnectRules");
            }
        }
    }
}
