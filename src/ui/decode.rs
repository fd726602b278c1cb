//! A query's result as typed rows. The UI reads through `query::fetch_tsv`, the path `eddy query`
//! uses too, because that is where a missing database or table is told apart from other
//! failures (the 503 page that says how to fix it). Rows therefore arrive as text; here each one
//! becomes the struct its query declares, each cell parsed as its field's type, so a column the
//! struct does not know, a missing one or a cell that does not parse is an error, never a blank.
use crate::query::Table;
use serde::de::value::{Error, MapDeserializer};
use serde::de::{DeserializeOwned, Deserializer, Error as _, IntoDeserializer, Visitor};
use std::str::FromStr;

/// Every row of `table` as a `T`, its fields matched to columns by name.
pub(crate) fn rows<T: DeserializeOwned>(table: &Table) -> Result<Vec<T>, Error> {
    table
        .rows
        .iter()
        .map(|cells| {
            T::deserialize(Row {
                columns: &table.columns,
                cells,
            })
        })
        .collect()
}

struct Row<'a> {
    columns: &'a [String],
    cells: &'a [String],
}

impl<'de> Deserializer<'de> for Row<'_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        // A short line would otherwise pass for a row with its last columns missing.
        if self.columns.len() != self.cells.len() {
            return Err(Error::custom(format!(
                "a row of {} cells under {} columns",
                self.cells.len(),
                self.columns.len()
            )));
        }
        let pairs = self.columns.iter().zip(self.cells).map(|(column, text)| {
            (
                column.as_str(),
                Cell {
                    column: column.as_str(),
                    text: text.as_str(),
                },
            )
        });
        visitor.visit_map(MapDeserializer::new(pairs))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum identifier
        ignored_any
    }
}

/// One cell's text, read as whatever its field asks for.
struct Cell<'a> {
    column: &'a str,
    text: &'a str,
}

impl Cell<'_> {
    fn parse<T: FromStr>(&self, what: &str) -> Result<T, Error> {
        self.text.parse().map_err(|_| {
            Error::custom(format!(
                "column `{}`: `{}` is not a {what}",
                self.column, self.text
            ))
        })
    }
}

macro_rules! numbers {
    ($($method:ident => $visit:ident($ty:ty)),* $(,)?) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
            visitor.$visit(self.parse::<$ty>(stringify!($ty))?)
        }
    )*};
}

impl<'de> Deserializer<'de> for Cell<'_> {
    type Error = Error;

    /// Text fields, and fields with their own `deserialize_with`, read the text as it is.
    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_str(self.text)
    }

    /// ClickHouse's booleans are `UInt8` 0 and 1; anything else is not one.
    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.text {
            "1" => visitor.visit_bool(true),
            "0" => visitor.visit_bool(false),
            _ => Err(Error::custom(format!(
                "column `{}`: `{}` is not a 0/1 flag",
                self.column, self.text
            ))),
        }
    }

    numbers! {
        deserialize_i8 => visit_i8(i8),
        deserialize_i16 => visit_i16(i16),
        deserialize_i32 => visit_i32(i32),
        deserialize_i64 => visit_i64(i64),
        deserialize_u8 => visit_u8(u8),
        deserialize_u16 => visit_u16(u16),
        deserialize_u32 => visit_u32(u32),
        deserialize_u64 => visit_u64(u64),
        deserialize_f64 => visit_f64(f64),
    }

    serde::forward_to_deserialize_any! {
        i128 u128 f32 char str string bytes byte_buf option unit unit_struct newtype_struct seq
        tuple tuple_struct map struct enum identifier ignored_any
    }
}

impl<'de> IntoDeserializer<'de, Error> for Cell<'_> {
    type Deserializer = Self;

    fn into_deserializer(self) -> Self {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct R {
        name: String,
        n: u64,
        ok: bool,
        success: i8,
        cost: f64,
    }

    fn table(columns: &[&str], rows: &[&[&str]]) -> Table {
        let owned = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
        Table {
            columns: owned(columns),
            rows: rows.iter().map(|r| owned(r)).collect(),
        }
    }

    const COLUMNS: &[&str] = &["cost", "n", "name", "ok", "success"];

    #[test]
    fn cells_become_typed_fields_by_column_name() {
        let t = table(
            COLUMNS,
            &[&["0.25", "18446744073709551615", "a\tb", "1", "-1"]],
        );
        assert_eq!(
            rows::<R>(&t).unwrap(),
            vec![R {
                name: "a\tb".into(),
                n: u64::MAX,
                ok: true,
                success: -1,
                cost: 0.25,
            }]
        );
        assert!(rows::<R>(&table(COLUMNS, &[])).unwrap().is_empty());
    }

    #[test]
    fn a_cell_that_does_not_parse_is_an_error_naming_its_column() {
        let e = rows::<R>(&table(COLUMNS, &[&["0.25", "-3", "a", "1", "0"]]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("column `n`") && e.contains("`-3`"), "{e}");
        let e = rows::<R>(&table(COLUMNS, &[&["0.25", "3", "a", "yes", "0"]]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("column `ok`"), "{e}");
    }

    #[test]
    fn a_column_missing_or_unknown_or_a_short_row_is_an_error() {
        let missing = table(&["cost", "n", "name", "ok"], &[&["1", "2", "a", "1"]]);
        assert!(rows::<R>(&missing)
            .unwrap_err()
            .to_string()
            .contains("success"));
        let mut extra = COLUMNS.to_vec();
        extra.push("surprise");
        let extra = table(&extra, &[&["1", "2", "a", "1", "0", "x"]]);
        assert!(rows::<R>(&extra)
            .unwrap_err()
            .to_string()
            .contains("surprise"));
        let short = table(COLUMNS, &[&["1", "2", "a", "1"]]);
        assert!(rows::<R>(&short).is_err());
    }
}
