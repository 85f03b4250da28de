"""The four table types (int, float, bool, string) as Spark and Arrow types, and which Spark
types may become which table type.

Invariant: a conversion is allowed only when it cannot lose information silently, except
that any number becomes float, rounded to the nearest double (as a JSON number written to a
float column is). Integers widen to int, decimals with no fraction (precision <= 18) become
int, booleans stay booleans and strings stay strings. Text sources (CSV) hold every
value as a string, so there strings may also be parsed into int, float or bool; Spark then
fails the load on the first malformed value (ANSI casts) instead of guessing.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import types as T

__all__ = ["arrow_type", "can_become", "spark_type"]

_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
_FRACTIONAL = (T.FloatType, T.DoubleType, T.DecimalType)
_TEXT = (T.StringType, T.CharType, T.VarcharType)

_SPARK: dict[str, T.DataType] = {
    "int": T.LongType(),
    "float": T.DoubleType(),
    "bool": T.BooleanType(),
    "string": T.StringType(),
}
_ARROW: dict[str, pa.DataType] = {
    "int": pa.int64(),
    "float": pa.float64(),
    "bool": pa.bool_(),
    "string": pa.string(),
}


def spark_type(kind: str) -> T.DataType:
    """The Spark type a column of table type ``kind`` is cast to before transfer."""
    return _SPARK[kind]


def arrow_type(kind: str, *, large_strings: bool = False) -> pa.DataType:
    """The Arrow type Spark sends for a column already cast to ``spark_type(kind)``."""
    if kind == "string" and large_strings:
        return pa.large_string()
    return _ARROW[kind]


def can_become(source: T.DataType, kind: str, *, text_source: bool = False) -> bool:
    """Whether a source column of Spark type ``source`` may load into table type ``kind``."""
    if isinstance(source, _TEXT):
        return kind == "string" or text_source
    if kind == "int":
        if isinstance(source, T.DecimalType):
            return source.scale == 0 and source.precision <= 18
        return isinstance(source, _INTEGRAL)
    if kind == "float":
        return isinstance(source, _INTEGRAL + _FRACTIONAL)
    if kind == "bool":
        return isinstance(source, T.BooleanType)
    return False
