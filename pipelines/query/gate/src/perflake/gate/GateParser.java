package perflake.gate;

import org.apache.spark.sql.catalyst.FunctionIdentifier;
import org.apache.spark.sql.catalyst.TableIdentifier;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.parser.ParameterContext;
import org.apache.spark.sql.catalyst.parser.ParseException;
import org.apache.spark.sql.catalyst.parser.ParserInterface;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;

/** Spark's own parser, with every parsed statement and expression judged by the gate before analysis,
 * and every text held to the gate's StatementBounds before Spark parses it (statements
 * and expressions, from SQL or a Spark Connect plan; data types and schemas, which a
 * query can pass as a string to from_json and friends). */
public final class GateParser implements ParserInterface {
    private final SparkSession session;
    private final ParserInterface delegate;
    private final StatementBounds bounds;

    public GateParser(SparkSession session, ParserInterface delegate) {
        this.session = session;
        this.delegate = delegate;
        this.bounds = new StatementBounds(session.sparkContext().getConf());
    }

    /** A Spark parse of text already within the bounds; the few statements that still
     * overflow the parser's stack are refused as too deep, in one sentence.
     *
     * The session's settings are judged first (Gate.checkSettings), not only after the
     * parse: Spark's parser substitutes `${env:NAME}`, `${system:name}` and
     * `${spark.setting}` into the text when the session's spark.sql.variable.substitute is
     * on, and a text that then fails to parse comes back in the error. Measured: with the
     * setting sent as a session setting, `SELECT x FROM ${env:NAME}` answered with the
     * variable's value in the parse error (the service's environment holds Spark Connect's
     * token). */
    private <T> T parse(ParseCall<T> call) throws ParseException {
        Gate.checkSettings(session);
        try {
            return call.run();
        } catch (StackOverflowError e) {
            throw bounds.tooDeep();
        }
    }

    private interface ParseCall<T> {
        T run() throws ParseException;
    }

    @Override
    public LogicalPlan parsePlan(String sql) throws ParseException {
        String text = bounds.check(sql);
        return Gate.checkParsed(parse(() -> delegate.parsePlan(text)), session, bounds);
    }

    @Override
    public LogicalPlan parsePlanWithParameters(String sql, ParameterContext params) throws ParseException {
        String text = bounds.check(sql);
        return Gate.checkParsed(parse(() -> delegate.parsePlanWithParameters(text, params)), session, bounds);
    }

    @Override
    public LogicalPlan parseQuery(String sql) throws ParseException {
        String text = bounds.check(sql);
        return Gate.checkParsed(parse(() -> delegate.parseQuery(text)), session, bounds);
    }

    @Override
    public Expression parseExpression(String sql) throws ParseException {
        String text = bounds.check(sql);
        return Gate.checkParsedExpression(parse(() -> delegate.parseExpression(text)), session, bounds);
    }

    @Override
    public TableIdentifier parseTableIdentifier(String sql) throws ParseException {
        return parse(() -> delegate.parseTableIdentifier(sql));
    }

    @Override
    public FunctionIdentifier parseFunctionIdentifier(String sql) throws ParseException {
        return parse(() -> delegate.parseFunctionIdentifier(sql));
    }

    @Override
    public scala.collection.immutable.Seq<String> parseMultipartIdentifier(String sql) throws ParseException {
        return parse(() -> delegate.parseMultipartIdentifier(sql));
    }

    @Override
    public StructType parseRoutineParam(String sql) throws ParseException {
        String text = bounds.check(sql);
        return parse(() -> delegate.parseRoutineParam(text));
    }

    @Override
    public StructType parseTableSchema(String sql) throws ParseException {
        String text = bounds.check(sql);
        return parse(() -> delegate.parseTableSchema(text));
    }

    @Override
    public DataType parseDataType(String sql) throws ParseException {
        String text = bounds.check(sql);
        return parse(() -> delegate.parseDataType(text));
    }
}
