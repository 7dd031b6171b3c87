package perflake.gate;

import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

import org.apache.spark.SparkConf;
import org.apache.spark.sql.catalyst.analysis.ExpressionWithUnresolvedIdentifier;
import org.apache.spark.sql.catalyst.analysis.PlanWithUnresolvedIdentifier;
import org.apache.spark.sql.catalyst.analysis.UnresolvedFunction;
import org.apache.spark.sql.catalyst.analysis.UnresolvedRelation;
import org.apache.spark.sql.catalyst.analysis.UnresolvedTableValuedFunction;
import org.apache.spark.sql.catalyst.catalog.CatalogTable;
import org.apache.spark.sql.catalyst.catalog.HiveTableRelation;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.SubqueryExpression;
import org.apache.spark.sql.catalyst.expressions.UserDefinedExpression;
import org.apache.spark.sql.catalyst.parser.CatalystSqlParser$;
import org.apache.spark.sql.catalyst.plans.QueryPlan;
import org.apache.spark.sql.catalyst.plans.logical.Command;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.internal.SQLConf$;

import org.apache.spark.unsafe.types.UTF8String;

import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

/** The read-only rule of perflake's shared SQL endpoints, judged on plans, not on text.
 *
 * A statement passes only if it is a query (or SHOW / DESCRIBE / EXPLAIN / USE) whose
 * every relation is a catalog table or view of database `perf`, that calls no function
 * reaching the JVM, the file system or user code, and that runs in a session whose
 * configuration is the service's own. Everything else is refused with a Refusal naming
 * what and why. The parsed plan is judged before analysis (analysis itself can read a
 * file's schema or load a class), the analyzed plan after it (views expanded, commands
 * in their final form). */
public final class Gate {
    public static final String DATABASE = "perf";
    static final String SCOPE = "this endpoint runs only read-only queries over the tables of database perf";

    /** Commands that only read metadata or explain a plan. USE is judged separately. */
    private static final Set<String> READ_COMMANDS = new HashSet<>(Arrays.asList(
        "ShowTables", "ShowTablesCommand", "ShowTablesExtended", "ShowTableExtended", "ShowViews",
        "ShowViewsCommand", "ShowNamespaces", "ShowNamespacesCommand", "ShowColumns", "ShowColumnsCommand",
        "DescribeRelation", "DescribeTableCommand", "DescribeColumn", "DescribeColumnCommand",
        "DescribeNamespace", "DescribeDatabaseCommand", "ShowPartitions", "ShowPartitionsCommand",
        "ShowTableProperties", "ShowTablePropertiesCommand", "ShowCreateTable", "ShowCreateTableCommand",
        "ShowFunctions", "ShowFunctionsCommand", "DescribeFunction", "DescribeFunctionCommand",
        "ShowCurrentNamespace", "ShowCurrentNamespaceCommand", "ShowCatalogs", "ShowCatalogsCommand",
        "ExplainCommand", "DescribeQueryCommand"));
    private static final Set<String> USE_COMMANDS = new HashSet<>(Arrays.asList(
        "SetCatalogAndNamespace", "SetNamespaceCommand"));
    private static final Set<String> USABLE_NAMESPACES = new HashSet<>(Arrays.asList(DATABASE, "default"));

    /** Leaves that read nothing outside the catalog: literal rows, ranges, CTE references,
     * the result of an allowed command. Catalog tables are judged by their database. */
    private static final Set<String> SAFE_LEAVES = new HashSet<>(Arrays.asList(
        "LocalRelation", "OneRowRelation", "Range", "CTERelationRef", "CommandResult", "EmptyRelation"));

    /** Data source names that, as the first part of a table name, make it a path read. */
    private static final Set<String> FORMATS = new HashSet<>(Arrays.asList(
        "parquet", "orc", "json", "csv", "text", "binaryfile", "avro", "jdbc", "delta", "hive", "xml",
        "libsvm", "image", "kafka", "noop", "console", "rate", "socket", "memory", "file", "files",
        "org.apache.spark.sql.parquet", "org.apache.spark.sql.json", "org.apache.spark.sql.csv"));

    /** Functions refused by name before analysis (analysis of reflect already loads the class). */
    private static final Set<String> REFLECTION = new HashSet<>(Arrays.asList(
        "reflect", "java_method", "try_reflect", "reflect2"));
    private static final Set<String> XML = new HashSet<>(Arrays.asList(
        "xpath", "xpath_boolean", "xpath_double", "xpath_float", "xpath_int", "xpath_long", "xpath_number",
        "xpath_short", "xpath_string", "from_xml", "schema_of_xml"));
    private static final Set<String> FILE_FUNCTIONS = new HashSet<>(Arrays.asList(
        "in_file", "read_files", "read_csv", "read_json", "read_text", "read_parquet", "read_blob", "read_orc",
        "read_avro", "read_xml", "glob"));
    /** Functions that parse one of their arguments (by position) as a data type or schema
     * while the statement is analysed, with Spark's static parser, which the gate's parser
     * does not wrap: that argument must be text the gate can bound first. */
    private static final Map<String, Integer> TYPE_ARGUMENTS = Map.of(
        "from_json", 1, "from_csv", 1, "variant_get", 2, "try_variant_get", 2);
    /** Spark's own schema of a sample it parses with a bounded nesting depth (Jackson). */
    private static final Set<String> SCHEMA_OF = Set.of("schema_of_json", "schema_of_csv");

    /** Why a table is not read with options of the statement's own (judgeReadOptions). */
    static final String READ_OPTIONS = "hands settings to the service's file readers (some name classes for them "
        + "to load), and this endpoint reads the tables of database perf only as the catalog defines them; read it "
        + "without options";

    /** Session settings that the Thrift server itself gives every session (output formats). */
    private static final Set<String> FREE_SETTINGS = new HashSet<>(Arrays.asList(
        "spark.sql.hive.version", "spark.sql.datetime.java8API.enabled", "spark.sql.binaryOutputStyle"));

    private Gate() {}

    /** Throws the Refusal (a checked AnalysisException in Java's eyes, unchecked in Scala's,
     * as Spark's own analyzer throws it); typed to be written `throw refuse(...)`. */
    static RuntimeException refuse(String what, String why) {
        throw Gate.<RuntimeException>sneaky(new Refusal(what, why));
    }

    @SuppressWarnings("unchecked")
    private static <T extends Throwable> T sneaky(Throwable t) throws T {
        throw (T) t;
    }

    // ---------------------------------------------------------------- parsed plans

    /** Judge a statement as parsed, before analysis touches the catalog, files or classes. */
    public static LogicalPlan checkParsed(LogicalPlan plan, SparkSession session, StatementBounds bounds) {
        checkSettings(session);
        String root = name(plan);
        if (isCommand(plan)) {
            judgeCommand(plan, root);
            // an allowed command that analyses a query of its own (EXPLAIN, DESCRIBE QUERY): its
            // analysis can already list files or load classes, so the query is judged as parsed too
            for (String field : new String[] {"logicalPlan", "plan"}) {
                Object inner = call(plan, field);
                if (inner instanceof LogicalPlan) {
                    checkParsed((LogicalPlan) inner, session, bounds);
                    return plan;
                }
            }
        }
        for (QueryPlan<?> node : nodes(plan, true)) {
            String n = name(node);
            if (node != plan && node instanceof LogicalPlan && isCommand((LogicalPlan) node)) {
                throw refuse(words(n) + " inside a query", "would change tables, files or the session, and "
                                  + SCOPE);
            }
            refuseStatementKinds(n);
            if (node instanceof UnresolvedRelation) {
                UnresolvedRelation relation = (UnresolvedRelation) node;
                List<String> parts = parts(relation.multipartIdentifier());
                if (isPathRead(parts)) {
                    throw refuse("reading " + quoted(parts) + " by path", "reads files outside the catalog, and "
                                      + SCOPE);
                }
                judgeReadOptions(quoted(parts), relation.options().keySet());
            }
            if (node instanceof PlanWithUnresolvedIdentifier) {
                PlanWithUnresolvedIdentifier p = (PlanWithUnresolvedIdentifier) node;
                checkParsed(p.planBuilder().apply(identifierName(p.identifierExpr()), p.children()), session, bounds);
            }
            if (node instanceof UnresolvedTableValuedFunction) {
                judgeFunctionName(parts(((UnresolvedTableValuedFunction) node).name()));
            }
            for (Expression e : expressions(node)) {
                judgeParsedExpression(e, bounds);
            }
        }
        return plan;
    }

    /** Judge an expression parsed on its own (a DataFrame's `selectExpr` or `filter` text,
     * Spark Connect's expression strings) as checkParsed judges a statement's expressions:
     * function names, IDENTIFIER(...), and the plans of its subqueries. Its analysis would
     * otherwise load the class that `reflect` names, or list a table's files with the
     * options of a subquery's `WITH (...)`, before the analyzed plan is judged. */
    public static Expression checkParsedExpression(Expression expr, SparkSession session, StatementBounds bounds) {
        for (Expression e : collectAll(expr)) {
            judgeParsedExpression(e, bounds);
            if (e instanceof SubqueryExpression) {
                checkParsed(((SubqueryExpression) e).plan(), session, bounds);
            }
        }
        return expr;
    }

    /** One parsed expression (its children are judged as the walk reaches them). */
    private static void judgeParsedExpression(Expression e, StatementBounds bounds) {
        if (e instanceof UnresolvedFunction) {
            UnresolvedFunction f = (UnresolvedFunction) e;
            List<String> name = parts(f.nameParts());
            judgeFunctionName(name);
            judgeTypeArgument(name, f.arguments().size(), i -> typeArgument(f.arguments().apply(i)), bounds);
        }
        if (e instanceof ExpressionWithUnresolvedIdentifier) {
            ExpressionWithUnresolvedIdentifier x = (ExpressionWithUnresolvedIdentifier) e;
            for (Expression built : collectAll(x.exprBuilder().apply(identifierName(x.identifierExpr()),
                                                                     x.otherExprs()))) {
                judgeParsedExpression(built, bounds);
            }
        }
        refuseExpression(e);
    }

    /** The name an IDENTIFIER(...) clause stands for. Spark builds the clause's table or
     * function only during analysis, from that name and a closure holding what else the
     * statement said (a table's WITH options, a function's arguments), after the parsed
     * plan was judged; so the gate evaluates the name now and builds what Spark will, to
     * judge it like any other. A name it cannot evaluate without analysis (one computed by
     * a function, a parameter, a variable) is refused. */
    private static scala.collection.immutable.Seq<String> identifierName(Expression name) {
        Object value = null;
        if (name.resolved() && name.foldable()) {
            try {
                value = name.eval(null);
            } catch (RuntimeException e) {
                value = null;
            }
        }
        if (value instanceof UTF8String) {
            try {
                return CatalystSqlParser$.MODULE$.parseMultipartIdentifier(value.toString());
            } catch (RuntimeException e) {
                // not a name Spark can read either; refused below
            }
        }
        String written;
        try {
            written = name.sql();
        } catch (RuntimeException e) {
            written = "...";
        }
        throw refuse("IDENTIFIER(" + written + ")", "names its table or function by a value that is known only "
                     + "while the statement is analysed, after the gate has judged it; write the name as a string "
                     + "literal");
    }

    /** Options given to a table read (`FROM t WITH ('k' = 'v')`, over Connect
     * `spark.read.option(k, v).table(t)`). Spark hands them to the table's file readers as
     * Hadoop and Parquet settings, some of which name classes to load and instantiate
     * (`fs.file.impl`, `parquet.crypto.factory.class`) or carry Java-serialised objects
     * (`parquet.private.read.filter.predicate`): the same reach as a session setting (checkSettings),
     * for one relation. `allowed` are keys the table itself carries. */
    static void judgeReadOptions(String table, java.util.Collection<String> keys, Set<String> allowed) {
        for (String key : keys) {
            if (!allowed.contains(key.toLowerCase(Locale.ROOT))) {
                throw refuse("reading " + table + " with the option " + key, READ_OPTIONS);
            }
        }
    }

    static void judgeReadOptions(String table, java.util.Collection<String> keys) {
        judgeReadOptions(table, keys, Set.of());
    }

    /** A parsed argument as judgeTypeArgument sees it: a string literal's text, the name of
     * a function called there, or neither (null). */
    private static Object typeArgument(Expression arg) {
        if (arg instanceof Literal && ((Literal) arg).value() instanceof UTF8String) {
            return ((Literal) arg).value().toString();
        }
        if (arg instanceof UnresolvedFunction) {
            List<String> name = parts(((UnresolvedFunction) arg).nameParts());
            return new FunctionCall(name.get(name.size() - 1).toLowerCase(Locale.ROOT));
        }
        return null;
    }

    /** A function called as an argument, by its last name part, lower case. */
    record FunctionCall(String name) {}

    /** Judge the type argument of a function of TYPE_ARGUMENTS called with `count`
     * arguments, `argument(i)` giving argument i as a String (a literal's text), a
     * FunctionCall, or null: a literal is held to the statement bounds; Spark's own
     * schema_of_json / schema_of_csv passes; anything computed is refused. The Connect
     * guard judges DataFrame calls with it too. */
    static void judgeTypeArgument(List<String> name, int count, java.util.function.IntFunction<Object> argument,
                                  StatementBounds bounds) {
        if (name.isEmpty()) {
            return;
        }
        String fn = name.get(name.size() - 1).toLowerCase(Locale.ROOT);
        Integer index = TYPE_ARGUMENTS.get(fn);
        if (index == null || index >= count) {
            return;
        }
        Object arg = argument.apply(index);
        if (arg instanceof String) {
            bounds.check((String) arg);
        } else if (!(arg instanceof FunctionCall && SCHEMA_OF.contains(((FunctionCall) arg).name()))) {
            throw refuse(fn + " with a type computed by an expression", "is parsed while the statement is "
                         + "analysed, before the gate can bound its size; write the type as a string literal");
        }
    }

    // ---------------------------------------------------------------- analyzed plans

    /** Judge a statement as analyzed: views expanded, relations resolved, commands final. */
    public static void checkAnalyzed(LogicalPlan plan, SparkSession session) {
        checkSettings(session);
        if (isCommand(plan)) {
            judgeCommand(plan, name(plan));
            return;  // an allowed command's inner plan (EXPLAIN, DESCRIBE QUERY) is judged when it is analyzed
        }
        for (QueryPlan<?> node : nodes(plan, false)) {
            String n = name(node);
            if (node != plan && node instanceof LogicalPlan && isCommand((LogicalPlan) node)) {
                throw refuse(words(n) + " inside a query", "would change tables, files or the session, and "
                                  + SCOPE);
            }
            refuseStatementKinds(n);
            if (node instanceof HiveTableRelation) {
                judgeTable(((HiveTableRelation) node).tableMeta());
            } else if (node instanceof LogicalRelation) {
                Option<CatalogTable> table = ((LogicalRelation) node).catalogTable();
                if (table.isEmpty()) {
                    throw refuse("reading files by path", "reads files outside the catalog, and " + SCOPE);
                }
                judgeTable(table.get());
                if (((LogicalRelation) node).relation() instanceof HadoopFsRelation) {
                    // what the read was given besides the table's own storage properties and path
                    Set<String> own = new HashSet<>(Set.of("path"));
                    for (String key : CollectionConverters.asJava(table.get().storage().properties()).keySet()) {
                        own.add(key.toLowerCase(Locale.ROOT));
                    }
                    HadoopFsRelation files = (HadoopFsRelation) ((LogicalRelation) node).relation();
                    judgeReadOptions(table.get().identifier().unquotedString(),
                                     CollectionConverters.asJava(files.options()).keySet(), own);
                }
            } else if (node instanceof LogicalPlan && ((LogicalPlan) node).children().isEmpty()
                       && !SAFE_LEAVES.contains(n)) {
                throw refuse("reading from " + words(n), "is not a table of database perf, and " + SCOPE);
            }
            for (Expression e : expressions(node)) {
                refuseExpression(e);
            }
        }
        PartitionBound.check(plan, session);
    }

    // ---------------------------------------------------------------- the judgments

    private static void judgeCommand(LogicalPlan plan, String n) {
        if (READ_COMMANDS.contains(n)) {
            return;
        }
        if (USE_COMMANDS.contains(n)) {
            List<String> ns = namespaceOf(plan);
            if (ns != null && ns.size() == 1 && USABLE_NAMESPACES.contains(ns.get(0).toLowerCase(Locale.ROOT))) {
                return;
            }
            throw refuse("USE " + (ns == null ? "of that namespace" : String.join(".", ns)),
                              "switches to a database other than perf, and " + SCOPE);
        }
        String what = words(n);
        if (n.startsWith("Set") || n.startsWith("Reset")) {
            if (n.contains("Variable")) {
                throw refuse(what, "changes the session's state, and " + SCOPE);
            }
            throw refuse(what.startsWith("RESET") ? "RESET" : "SET", "would change the service's "
                              + "configuration, which is fixed for every user");
        }
        if (n.startsWith("Add") || n.startsWith("List")) {
            throw refuse(what, "loads or lists code and files on the service, and " + SCOPE);
        }
        if (n.contains("Function")) {
            throw refuse(what, "registers code to run inside the service, and " + SCOPE);
        }
        throw refuse(what, "is a command that changes tables, files or the session, and " + SCOPE);
    }

    private static void refuseStatementKinds(String n) {
        if (n.equals("ScriptTransformation") || n.contains("ScriptTransformation")) {
            throw refuse("TRANSFORM ... USING", "runs a program on the service's host, and " + SCOPE);
        }
        if (n.startsWith("InsertInto") || n.startsWith("Insert")) {
            throw refuse("INSERT", "writes tables or files, and " + SCOPE);
        }
        if (n.contains("ExecuteImmediate")) {
            throw refuse("EXECUTE IMMEDIATE", "runs a statement built at run time, and " + SCOPE);
        }
        if (n.startsWith("Compound") || n.endsWith("Statement") && !n.equals("SingleStatement")
            || n.equals("ExceptionHandler")) {
            throw refuse("a SQL script (" + words(n) + ")", "runs several statements, and " + SCOPE);
        }
        if (n.equals("UnresolvedHaving") || n.equals("UnresolvedHint")) {
            return;
        }
    }

    /** Refuse a function called by name (its name parts as written) that reaches the JVM,
     * the file system, XML or user code; the Connect guard judges Connect's names with it. */
    static void judgeFunctionName(List<String> parts) {
        if (parts.isEmpty()) {
            return;
        }
        String fn = parts.get(parts.size() - 1).toLowerCase(Locale.ROOT);
        if (REFLECTION.contains(fn)) {
            throw refuse("the function " + fn, "calls Java methods inside the service, and " + SCOPE);
        }
        if (XML.contains(fn)) {
            throw refuse("the function " + fn, "parses XML, which can reference files and URLs, and " + SCOPE);
        }
        if (FILE_FUNCTIONS.contains(fn)) {
            throw refuse("the function " + fn, "reads files on the service's host, and " + SCOPE);
        }
        if (parts.size() > 1 && !(parts.size() == 2 && parts.get(0).equalsIgnoreCase("builtin"))
            && !(parts.size() == 3 && parts.get(0).equalsIgnoreCase("system")
                 && parts.get(1).equalsIgnoreCase("builtin"))) {
            throw refuse("the function " + String.join(".", parts), "is not a built-in function, and "
                              + "user-defined functions run code inside the service");
        }
    }

    private static void refuseExpression(Expression e) {
        String n = name(e);
        if (n.equals("CallMethodViaReflection") || n.equals("TryReflect")) {
            throw refuse("reflect/java_method", "calls Java methods inside the service, and " + SCOPE);
        }
        if (e instanceof UserDefinedExpression || n.startsWith("Hive") && (n.contains("UDF") || n.contains("UDAF"))
            || n.startsWith("Python") || n.startsWith("ScalaUD") || n.equals("ScalaAggregator")) {
            throw refuse("the user-defined function " + prettyName(e), "runs code inside the service, and "
                              + SCOPE);
        }
        if (n.startsWith("XPath") || n.equals("XmlToStructs") || n.equals("SchemaOfXml")) {
            throw refuse("the function " + prettyName(e), "parses XML, which can reference files and URLs, and "
                              + SCOPE);
        }
    }

    private static void judgeTable(CatalogTable table) {
        Option<String> db = table.identifier().database();
        String database = db.isDefined() ? db.get() : "";
        if (!database.equalsIgnoreCase(DATABASE)) {
            throw refuse("reading " + table.identifier().unquotedString(), "is not a table of database perf, and "
                              + SCOPE);
        }
    }

    /** Refuse if a runtime SQL setting of the session differs from the service's: a client
     * can send settings when it connects (JDBC URL, hiveconf), which no statement shows. */
    static void checkSettings(SparkSession session) {
        SparkConf service = session.sparkContext().getConf();
        Map<String, String> settings = CollectionConverters.asJava(session.sessionState().conf().getAllConfs());
        for (Map.Entry<String, String> kv : settings.entrySet()) {
            String key = kv.getKey();
            if (FREE_SETTINGS.contains(key) || key.startsWith(HIVE_SERVER)) {
                continue;
            }
            String expected;
            if (key.startsWith("spark.sql.")) {
                // Static SQL settings cannot change after start; the runtime ones can.
                if (SQLConf$.MODULE$.isStaticConfigKey(key)) {
                    continue;
                }
                Option<String> base = service.getOption(key);
                expected = base.isDefined() ? base.get() : defaultOf(key);
            } else {
                // Any other key, as a new session of this service has it (or absent): a
                // session's Hadoop settings (parquet.*, fs.*, spark.hadoop.*) reach the readers
                // of every file it scans, and some name classes Hadoop or Parquet instantiate.
                expected = baseline(session).get(key);
            }
            if (!kv.getValue().equals(expected)) {
                throw refuse("a session whose configuration sets " + key,
                                  "differs from the service's, and configuration changes are not allowed on this "
                                  + "endpoint (connect without session settings)");
            }
        }
    }

    /** HiveServer2 writes its own settings (port, host, authentication) into each session. */
    private static final String HIVE_SERVER = "hive.server2.";
    private static volatile Map<String, String> baseline;

    /** The settings of a new session of this service, before any client could set one. */
    private static Map<String, String> baseline(SparkSession session) {
        if (baseline == null) {
            synchronized (Gate.class) {
                if (baseline == null) {
                    baseline = CollectionConverters.asJava(session.newSession().sessionState().conf().getAllConfs());
                }
            }
        }
        return baseline;
    }

    private static String defaultOf(String key) {
        org.apache.spark.internal.config.ConfigEntry<?> entry = SQLConf$.MODULE$.getConfigEntry(key);
        return entry == null ? null : entry.defaultValueString();
    }

    // ---------------------------------------------------------------- walking plans

    /** Every node of the plan: children, CTE definitions (innerChildren) when `inner`, and
     * the plans of subquery expressions, depth first. */
    static List<QueryPlan<?>> nodes(QueryPlan<?> plan, boolean inner) {
        List<QueryPlan<?>> out = new ArrayList<>();
        collect(plan, inner, out);
        return out;
    }

    private static void collect(QueryPlan<?> plan, boolean inner, List<QueryPlan<?>> out) {
        out.add(plan);
        for (Object child : CollectionConverters.asJava(plan.children())) {
            collect((QueryPlan<?>) child, inner, out);
        }
        if (inner) {
            for (Object child : CollectionConverters.asJava(plan.innerChildren())) {
                if (child instanceof QueryPlan) {
                    collect((QueryPlan<?>) child, inner, out);
                }
            }
        }
        for (Expression e : expressions(plan)) {
            if (e instanceof SubqueryExpression) {
                collect(((SubqueryExpression) e).plan(), inner, out);
            }
        }
    }

    /** An expression and every expression nested in it. */
    static List<Expression> collectAll(Expression e) {
        List<Expression> out = new ArrayList<>();
        collectExpressions(e, out);
        return out;
    }

    /** Every expression of a node, nested ones included. */
    static List<Expression> expressions(QueryPlan<?> node) {
        List<Expression> out = new ArrayList<>();
        for (Object e : CollectionConverters.asJava(node.expressions())) {
            collectExpressions((Expression) e, out);
        }
        return out;
    }

    private static void collectExpressions(Expression e, List<Expression> out) {
        out.add(e);
        for (Object child : CollectionConverters.asJava(e.children())) {
            collectExpressions((Expression) child, out);
        }
    }

    static boolean isCommand(LogicalPlan plan) {
        return plan instanceof Command;
    }

    static boolean isPathRead(List<String> parts) {
        if (parts.size() < 2) {
            return false;
        }
        String first = parts.get(0).toLowerCase(Locale.ROOT);
        if (FORMATS.contains(first) || first.contains(".")) {
            return true;
        }
        for (String p : parts) {
            if (p.contains("/") || p.contains("\\") || p.contains(":")) {
                return true;
            }
        }
        return false;
    }

    private static List<String> namespaceOf(LogicalPlan plan) {
        for (Object source : new Object[] {plan, call(plan, "child")}) {
            for (String method : new String[] {"namespace", "multipartIdentifier", "nameParts"}) {
                Object value = call(source, method);
                if (value instanceof scala.collection.Seq) {
                    return parts((scala.collection.Seq<?>) value);
                }
            }
        }
        return null;
    }

    private static Object call(Object target, String method) {
        if (target == null) {
            return null;
        }
        try {
            Method m = target.getClass().getMethod(method);
            return m.invoke(target);
        } catch (ReflectiveOperationException | RuntimeException e) {
            return null;
        }
    }

    static List<String> parts(scala.collection.Seq<?> seq) {
        List<String> out = new ArrayList<>();
        for (Object o : CollectionConverters.asJava(seq)) {
            out.add(String.valueOf(o));
        }
        return out;
    }

    private static String quoted(List<String> parts) {
        List<String> q = new ArrayList<>();
        for (String p : parts) {
            q.add("`" + p + "`");
        }
        return String.join(".", q);
    }

    private static String prettyName(Expression e) {
        try {
            return e.prettyName();
        } catch (RuntimeException ex) {
            return name(e);
        }
    }

    static String name(Object o) {
        String n = o.getClass().getSimpleName();
        return n.endsWith("$") ? n.substring(0, n.length() - 1) : n;
    }

    /** A plan class as SQL words: DropTableCommand -> DROP TABLE, AddJarsCommand -> ADD JARS. */
    static String words(String className) {
        String n = className;
        for (String suffix : new String[] {"Command", "Statement", "Exec"}) {
            if (n.endsWith(suffix) && n.length() > suffix.length()) {
                n = n.substring(0, n.length() - suffix.length());
            }
        }
        return n.replaceAll("([a-z0-9])([A-Z])", "$1 $2").replaceAll("([A-Z])([A-Z][a-z])", "$1 $2")
                .toUpperCase(Locale.ROOT);
    }
}
