//! A [`Search`]'s conditions in each SQL dialect (see
//! [`search`](crate::inbox::search)): every path and value is a bound
//! parameter; the statement's text depends only on the terms' shapes.
//!
//! | dialect | a payload scalar | contains |
//! |---|---|---|
//! | SQLite | `json_type` / `json_extract` on `CAST(body AS TEXT)`, behind `json_valid` | `instr` |
//! | PostgreSQL | `"<table>_payload"(body)` (`jsonb`, `NULL` for a body that is not JSON) `#>>`, and `@>` for an equality (a `jsonb_path_ops` GIN index on the function answers it) | `strpos` |
//! | MySQL/MariaDB | `JSON_EXTRACT` / `JSON_UNQUOTE` behind `JSON_VALID`, compared as binary strings (exact, whatever the collation) | `INSTR` on binary strings |

use super::ListParam;
use crate::inbox::search::{self, Search, SearchOp, SearchTerm, Segment};

/// Which dialect writes the conditions (a build has the variants of its
/// SQL features).
#[derive(Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    not(all(feature = "sqlite", feature = "postgres", feature = "mysql")),
    allow(dead_code)
)]
pub(crate) enum SearchSql {
    Sqlite,
    Postgres,
    Mysql,
}

/// Appends text and bound values to a statement.
pub(crate) struct Builder<'a> {
    pub(crate) sql: &'a mut String,
    pub(crate) params: &'a mut Vec<ListParam>,
    pub(crate) param: fn(usize) -> String,
}

impl Builder<'_> {
    fn text(&mut self, text: &str) {
        self.sql.push_str(text);
    }

    fn bind(&mut self, value: &str) {
        self.params.push(ListParam::Text(value.to_owned()));
        let placeholder = (self.param)(self.params.len());
        self.sql.push_str(&placeholder);
    }
}

/// The PostgreSQL function reading a body as `jsonb`.
pub(crate) fn payload_function(table: &str) -> String {
    format!("\"{table}_payload\"")
}

/// PostgreSQL's `CREATE OR REPLACE FUNCTION`: the body as `jsonb`, `NULL`
/// when it is not UTF-8 JSON. `IMMUTABLE` (it depends on its argument
/// only), so that an index may be built on it.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub(crate) fn create_payload_function(table: &str) -> String {
    format!(
        "CREATE OR REPLACE FUNCTION {}(b bytea) RETURNS jsonb LANGUAGE plpgsql IMMUTABLE \
         PARALLEL SAFE AS $f$ BEGIN RETURN convert_from(b, 'UTF8')::jsonb; \
         EXCEPTION WHEN others THEN RETURN NULL; END $f$",
        payload_function(table)
    )
}

/// A probe of the function: the schema check's.
pub(crate) fn payload_function_probe(table: &str) -> String {
    format!("SELECT {}(''::bytea)", payload_function(table))
}

/// The scalar's text at the bound path, or `NULL`.
fn scalar(dialect: SearchSql, table: &str, segments: &[Segment], b: &mut Builder<'_>) {
    let path = &match dialect {
        SearchSql::Postgres => search::pg_path(segments),
        SearchSql::Sqlite | SearchSql::Mysql => search::json_path(segments),
    };
    match dialect {
        SearchSql::Sqlite => {
            let j = "CAST(body AS TEXT)";
            b.text(&format!(
                "(CASE WHEN json_valid({j}) THEN CASE json_type({j}, "
            ));
            b.bind(path);
            b.text(") WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' WHEN 'text' THEN json_extract(");
            b.text(j);
            b.text(", ");
            b.bind(path);
            b.text(") WHEN 'integer' THEN CAST(json_extract(");
            b.text(j);
            b.text(", ");
            b.bind(path);
            b.text(") AS TEXT) WHEN 'real' THEN CAST(json_extract(");
            b.text(j);
            b.text(", ");
            b.bind(path);
            b.text(") AS TEXT) END END)");
        }
        SearchSql::Postgres => {
            b.text("(SELECT CASE WHEN jsonb_typeof(x #> CAST(");
            b.bind(path);
            b.text(" AS text[])) IN ('string', 'number', 'boolean')");
            // `#>` reads a key of digits on an object too: an index
            // segment must step into an array, as everywhere else.
            for (at, segment) in segments.iter().enumerate() {
                if matches!(segment, Segment::Index(_)) {
                    b.text(" AND jsonb_typeof(x #> CAST(");
                    b.bind(&search::pg_path(&segments[..at]));
                    b.text(" AS text[])) = 'array'");
                }
            }
            b.text(" THEN x #>> CAST(");
            b.bind(path);
            b.text(&format!(
                " AS text[]) END FROM (SELECT {}(body) AS x) AS payload)",
                payload_function(table)
            ));
        }
        SearchSql::Mysql => {
            let j = "CONVERT(body USING utf8mb4)";
            b.text(&format!(
                "(CASE WHEN JSON_VALID({j}) THEN CASE WHEN JSON_TYPE(JSON_EXTRACT({j}, "
            ));
            b.bind(path);
            b.text(&format!(
                ")) IN ('STRING', 'INTEGER', 'UNSIGNED INTEGER', 'DOUBLE', 'DECIMAL', 'BOOLEAN') \
                 THEN JSON_UNQUOTE(JSON_EXTRACT({j}, "
            ));
            b.bind(path);
            b.text(")) END END)");
        }
    }
}

/// Appends ` AND …` for each of `search`'s terms.
pub(crate) fn push(dialect: SearchSql, table: &str, search: &Search, b: &mut Builder<'_>) {
    for term in search.terms() {
        match term {
            SearchTerm::ErrorContains(text) => match dialect {
                SearchSql::Sqlite => {
                    b.text(" AND instr(last_error, ");
                    b.bind(text);
                    b.text(") > 0");
                }
                SearchSql::Postgres => {
                    b.text(" AND strpos(last_error, ");
                    b.bind(text);
                    b.text(") > 0");
                }
                SearchSql::Mysql => {
                    b.text(" AND INSTR(CAST(last_error AS BINARY), CAST(");
                    b.bind(text);
                    b.text(" AS BINARY)) > 0");
                }
            },
            SearchTerm::Payload { path, op, value } => {
                if dialect == SearchSql::Postgres && *op == SearchOp::Eq {
                    // The containment an index can answer, then the exact test.
                    let f = payload_function(table);
                    b.text(" AND (");
                    for (i, doc) in search::containments(path, value).iter().enumerate() {
                        if i > 0 {
                            b.text(" OR ");
                        }
                        b.text(&format!("{f}(body) @> CAST("));
                        b.bind(doc);
                        b.text(" AS jsonb)");
                    }
                    b.text(")");
                }
                let binary = dialect == SearchSql::Mysql;
                let open_value = |b: &mut Builder<'_>| {
                    if binary {
                        b.text("CAST(");
                        b.bind(value);
                        b.text(" AS BINARY)");
                    } else {
                        b.bind(value);
                    }
                };
                b.text(" AND ");
                match op {
                    SearchOp::Eq | SearchOp::Ne => {
                        if binary {
                            b.text("CAST(");
                        }
                        scalar(dialect, table, path, b);
                        if binary {
                            b.text(" AS BINARY)");
                        }
                        b.text(if *op == SearchOp::Eq { " = " } else { " <> " });
                        open_value(b);
                    }
                    SearchOp::Prefix => match dialect {
                        SearchSql::Sqlite => {
                            b.text("substr(");
                            scalar(dialect, table, path, b);
                            b.text(", 1, length(");
                            b.bind(value);
                            b.text(")) = ");
                            b.bind(value);
                        }
                        SearchSql::Postgres => {
                            b.text("starts_with(");
                            scalar(dialect, table, path, b);
                            b.text(", ");
                            b.bind(value);
                            b.text(")");
                        }
                        SearchSql::Mysql => {
                            b.text("LEFT(CAST(");
                            scalar(dialect, table, path, b);
                            b.text(" AS BINARY), LENGTH(CAST(");
                            b.bind(value);
                            b.text(" AS BINARY))) = ");
                            open_value(b);
                        }
                    },
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn built(dialect: SearchSql, text: &str, param: fn(usize) -> String) -> (String, usize) {
        let search: Search = text.parse().unwrap();
        let mut sql = String::new();
        let mut params = Vec::new();
        push(
            dialect,
            "inbox",
            &search,
            &mut Builder {
                sql: &mut sql,
                params: &mut params,
                param,
            },
        );
        (sql, params.len())
    }

    /// Values never reach the statement's text, and every placeholder has
    /// its value.
    #[test]
    fn values_are_bound_never_written() {
        let hostile = "x' OR 1=1; DROP TABLE inbox; --";
        let text =
            format!("a.b = \"{hostile}\" and a.c ^= \"{hostile}\" and error ~ \"{hostile}\"");
        for (dialect, param) in [
            (
                SearchSql::Sqlite,
                (|n| format!("?{n}")) as fn(usize) -> String,
            ),
            (SearchSql::Postgres, |n| format!("${n}")),
            (SearchSql::Mysql, |_| "?".to_owned()),
        ] {
            let (sql, n) = built(dialect, &text, param);
            assert!(!sql.contains("DROP"), "{sql}");
            let placeholders = if dialect == SearchSql::Mysql {
                sql.matches('?').count()
            } else {
                (1..=n).filter(|i| sql.contains(&param(*i))).count()
            };
            assert_eq!(placeholders, n, "{sql}");
        }
    }
}
