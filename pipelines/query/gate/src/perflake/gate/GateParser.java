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

/** Spark's own parser, with every parsed statement judged by the gate before analysis. */
public final class GateParser implements ParserInterface {
    private final SparkSession session;
    private final ParserInterface delegate;

    public GateParser(SparkSession session, ParserInterface delegate) {
        this.session = session;
        this.delegate = delegate;
    }

    @Override
    public LogicalPlan parsePlan(String sql) throws ParseException {
        return Gate.checkParsed(delegate.parsePlan(sql), session);
    }

    @Override
    public LogicalPlan parsePlanWithParameters(String sql, ParameterContext params) throws ParseException {
        return Gate.checkParsed(delegate.parsePlanWithParameters(sql, params), session);
    }

    @Override
    public LogicalPlan parseQuery(String sql) throws ParseException {
        return Gate.checkParsed(delegate.parseQuery(sql), session);
    }

    @Override
    public Expression parseExpression(String sql) throws ParseException {
        return delegate.parseExpression(sql);
    }

    @Override
    public TableIdentifier parseTableIdentifier(String sql) throws ParseException {
        return delegate.parseTableIdentifier(sql);
    }

    @Override
    public FunctionIdentifier parseFunctionIdentifier(String sql) throws ParseException {
        return delegate.parseFunctionIdentifier(sql);
    }

    @Override
    public scala.collection.immutable.Seq<String> parseMultipartIdentifier(String sql) throws ParseException {
        return delegate.parseMultipartIdentifier(sql);
    }

    @Override
    public StructType parseRoutineParam(String sql) throws ParseException {
        return delegate.parseRoutineParam(sql);
    }

    @Override
    public StructType parseTableSchema(String sql) throws ParseException {
        return delegate.parseTableSchema(sql);
    }

    @Override
    public DataType parseDataType(String sql) throws ParseException {
        return delegate.parseDataType(sql);
    }
}
