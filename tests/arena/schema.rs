//! HttpArena's database in the private cluster (`scripts/pg.sh start`, made by
//! `scripts/pg-arena.sql`) has the documented shape, read as `bench` over TCP with SCRAM
//! through the URL `scripts/pg.sh arena-env` prints, by psql and by gnosis's own client.

use std::process::Command;
use std::time::Duration;

use gnosis::pg::protocol::{Jsonb, INT4_OID, INT8_OID};
use gnosis::pg::url::DatabaseUrl;
use gnosis::pg::{BlockingClient, Config, Param, Row, Statement};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/pg.sh");

/// The DATABASE_URL `scripts/pg.sh arena-env` prints for the shared cluster.
fn arena_url() -> String {
    let output = Command::new("bash")
        .args([SCRIPT, "arena-env"])
        .env("GNOSIS_PG_PORT", crate::common::pg::port())
        .output()
        .expect("running scripts/pg.sh");
    let line = String::from_utf8(output.stdout).unwrap();
    let url = line
        .trim()
        .strip_prefix("export DATABASE_URL=")
        .unwrap_or_else(|| panic!("arena-env printed {line:?}"));
    assert_eq!(
        url,
        format!(
            "postgres://bench:bench@localhost:{}/benchmark",
            crate::common::pg::port()
        )
    );
    url.to_string()
}

/// Runs SQL through psql with `url`; returns the unaligned rows, fields split at '|'.
fn query(url: &str, sql: &str) -> Vec<Vec<String>> {
    crate::common::pg::psql(url, sql)
        .lines()
        .map(|line| line.split('|').map(str::to_string).collect())
        .collect()
}

fn one(url: &str, sql: &str) -> String {
    let rows = query(url, sql);
    assert_eq!(rows.len(), 1, "{sql}: {rows:?}");
    rows[0].join("|")
}

fn columns(url: &str, table: &str) -> String {
    one(
        url,
        &format!(
            "SELECT string_agg(column_name || ' ' || data_type, ', ' ORDER BY ordinal_position) \
             FROM information_schema.columns WHERE table_name = '{table}'"
        ),
    )
}

#[test]
fn items_has_the_documented_columns_rows_and_ranges() {
    let _pinned = crate::read_pinned_items();
    let url = arena_url();
    assert_eq!(one(&url, "SELECT current_user"), "bench");
    assert_eq!(
        columns(&url, "items"),
        "id integer, name text, category text, price integer, quantity integer, \
         active boolean, tags jsonb, rating_score integer, rating_count integer"
    );
    assert_eq!(
        one(
            &url,
            "SELECT count(*), count(DISTINCT id), min(id), max(id), \
                    min(price), max(price), min(quantity), max(quantity), \
                    min(rating_score), max(rating_score), min(rating_count), max(rating_count), \
                    count(DISTINCT category), bool_or(active), bool_and(active) FROM items"
        ),
        "100000|100000|1|100000|1|500|1|1000|1|50|1|500|10|t|f"
    );
    // Every tags value an array of 1 to 4 distinct strings; names end with the id.
    assert_eq!(
        one(
            &url,
            "SELECT count(*) FROM items WHERE jsonb_typeof(tags) <> 'array' \
                OR jsonb_array_length(tags) NOT BETWEEN 1 AND 4 \
                OR (SELECT count(DISTINCT t) FROM jsonb_array_elements_text(tags) t) \
                   <> jsonb_array_length(tags) \
                OR EXISTS (SELECT FROM jsonb_array_elements(tags) t \
                           WHERE jsonb_typeof(t) <> 'string') \
                OR name NOT LIKE '% % ' || id"
        ),
        "0"
    );
    // Every price is used, so that any range of the benchmark finds rows.
    assert_eq!(one(&url, "SELECT count(DISTINCT price) FROM items"), "500");
}

#[test]
fn items_is_deterministic_and_price_has_no_index() {
    let _pinned = crate::read_pinned_items();
    let url = arena_url();
    // The same rows on every machine and every run (pinned: change with the generator).
    assert_eq!(
        query(&url, "SELECT * FROM items WHERE id IN (1, 2, 100000) ORDER BY id"),
        [
            "1|Orbit Cable 1|home|208|153|t|[\"eco\", \"compact\"]|45|43",
            "2|Ember Cable 2|office|395|231|t|[\"popular\", \"premium\", \"sale\", \"wireless\"]|48|365",
            "100000|Cobalt Cable 100000|toys|452|540|f|[\"wireless\", \"compact\", \"eco\"]|9|393",
        ]
        .map(|row| row.split('|').map(str::to_string).collect::<Vec<_>>())
    );
    // The whole table, pinned too.
    assert_eq!(one(&url, ITEMS_DIGEST), "c33cdcceca03d1b1e976a9a312f381bf");
    // Only the primary key: the range query scans, as in HttpArena.
    assert_eq!(
        query(
            &url,
            "SELECT indexdef FROM pg_indexes WHERE tablename = 'items' ORDER BY indexname"
        ),
        [["CREATE UNIQUE INDEX items_pkey ON public.items USING btree (id)"]]
    );
    let plan = query(
        &url,
        "EXPLAIN SELECT id, name, category, price, quantity, active, tags, rating_score, \
         rating_count FROM items WHERE price BETWEEN 10 AND 50 LIMIT 50",
    );
    assert!(
        plan.iter().any(|row| row[0].contains("Seq Scan on items")),
        "{plan:?}"
    );
    assert_eq!(
        one(
            &url,
            "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = 'benchmark'"
        ),
        "bench"
    );
    assert_eq!(
        one(
            &url,
            "SELECT string_agg(tableowner, ',') FROM pg_tables WHERE tablename IN ('items', 'fortune')"
        ),
        "bench,bench"
    );
}

#[test]
fn fortune_has_tfbs_twelve_then_messages_that_need_escaping() {
    let url = arena_url();
    assert_eq!(columns(&url, "fortune"), "id integer, message text");
    assert_eq!(
        one(&url, "SELECT count(*), min(id), max(id) FROM fortune"),
        "200|1|200"
    );
    assert_eq!(
        one(&url, "SELECT message FROM fortune WHERE id = 11"),
        r#"<script>alert("This should not be displayed in a browser alert box.");</script>"#
    );
    assert_eq!(
        one(&url, "SELECT message FROM fortune WHERE id = 12"),
        "フレームワークのベンチマーク"
    );
    assert_eq!(
        one(&url, "SELECT message FROM fortune WHERE id = 2"),
        "A computer scientist is someone who fixes things that aren't broken."
    );
    // Each synthetic one holds &, ', " and non-ASCII text; some a <script> element.
    assert_eq!(
        one(
            &url,
            "SELECT count(*) FILTER (WHERE message LIKE '%&%' AND message LIKE '%''%' \
                                     AND message LIKE '%\"%' AND message ~ '[^\\x01-\\x7e]'), \
                    count(*) FILTER (WHERE message LIKE '%<script>%</script>%'), \
                    sum(octet_length(message)) BETWEEN 15000 AND 40000 \
             FROM fortune WHERE id > 12"
        ),
        "188|19|t"
    );
}

/// The production stack's users: four, 42 Alice Chen, as HttpArena's seed has them.
#[test]
fn users_has_four_rows_and_alice_is_42() {
    let url = arena_url();
    assert_eq!(
        columns(&url, "users"),
        "id integer, name text, email text, plan text"
    );
    assert_eq!(one(&url, "SELECT count(*) FROM users"), "4");
    assert_eq!(
        one(&url, "SELECT name FROM users WHERE id = 42"),
        "Alice Chen"
    );
}

const ITEMS_DIGEST: &str = "SELECT md5(string_agg(i::text, ',' ORDER BY id)) FROM items i";

/// Running the set-up again (`scripts/pg.sh arena-setup`) adds nothing and changes nothing.
#[test]
fn the_setup_is_idempotent() {
    let _pinned = crate::read_pinned_items();
    let url = arena_url();
    let fortunes = "SELECT count(*) || ' ' || md5(string_agg(f::text, ',' ORDER BY id)) \
                    FROM fortune f";
    let users = "SELECT md5(string_agg(u::text, ',' ORDER BY id)) FROM users u";
    let before = (
        one(&url, ITEMS_DIGEST),
        one(&url, fortunes),
        one(&url, users),
    );
    let status = Command::new("bash")
        .args([SCRIPT, "arena-setup"])
        .env("GNOSIS_PG_PORT", crate::common::pg::port())
        .status()
        .expect("running scripts/pg.sh arena-setup");
    assert!(status.success());
    let after = (
        one(&url, ITEMS_DIGEST),
        one(&url, fortunes),
        one(&url, users),
    );
    assert_eq!(after, before);
    assert!(before.1.starts_with("200 "), "{before:?}");
}

static ITEMS_QUERY: &[Statement] = &[Statement {
    name: "items",
    sql: "SELECT id, name, category, price, quantity, active, tags, rating_score, rating_count \
          FROM items WHERE price BETWEEN $1 AND $2 LIMIT $3",
    param_types: &[INT4_OID, INT4_OID, INT8_OID],
}];

/// A row of ITEMS_QUERY the way psql prints it, read with the column types gnosis decodes.
fn item_as_psql_prints_it(row: &Row<'_>) -> Result<String, gnosis::pg::DbError> {
    Ok(format!(
        "{}|{}|{}|{}|{}|{}|{}|{}|{}",
        row.get::<i32>(0)?,
        row.get::<&str>(1)?,
        row.get::<&str>(2)?,
        row.get::<i32>(3)?,
        row.get::<i32>(4)?,
        if row.get::<bool>(5)? { "t" } else { "f" },
        row.get::<Jsonb>(6)?.0,
        row.get::<i32>(7)?,
        row.get::<i32>(8)?,
    ))
}

/// HttpArena's query through gnosis's own client, connected with the DATABASE_URL
/// (SCRAM as bench): `LIMIT`'s bigint parameter, then bool, jsonb, text and int4 columns,
/// the same rows psql reads; a column read as another type is an error.
#[test]
fn gnosis_reads_httparenas_query_with_the_url() {
    let url = arena_url();
    let config = Config::from_vars(DatabaseUrl::parse(&url).unwrap().over(|_| None), |_| None);
    let mut client = BlockingClient::connect(config, ITEMS_QUERY, Duration::from_secs(30))
        .expect("connecting as bench");
    let mut rows = Vec::new();
    let params = [Param::Int4(10), Param::Int4(50), Param::Int8(50)];
    client
        .query(&ITEMS_QUERY[0], &params, |row| {
            rows.push(item_as_psql_prints_it(&row)?);
            Ok(())
        })
        .unwrap();
    assert_eq!(rows.len(), 50);
    let ids: Vec<&str> = rows
        .iter()
        .map(|row| row.split('|').next().unwrap())
        .collect();
    let mut expected: Vec<String> = query(
        &url,
        &format!(
            "SELECT * FROM items WHERE id IN ({}) ORDER BY id",
            ids.join(",")
        ),
    )
    .into_iter()
    .map(|fields| fields.join("|"))
    .collect();
    rows.sort_by_key(|row| row.split('|').next().unwrap().parse::<i32>().unwrap());
    expected.sort_by_key(|row| row.split('|').next().unwrap().parse::<i32>().unwrap());
    assert_eq!(rows, expected);
    for row in &rows {
        let price: i32 = row.split('|').nth(3).unwrap().parse().unwrap();
        assert!((10..=50).contains(&price), "{row}");
    }
    // An empty range, and a limit of 0: no rows.
    for params in [
        [Param::Int4(9999), Param::Int4(9999), Param::Int8(50)],
        [Param::Int4(1), Param::Int4(500), Param::Int8(0)],
    ] {
        let mut count = 0;
        client
            .query(&ITEMS_QUERY[0], &params, |_| {
                count += 1;
                Ok(())
            })
            .unwrap();
        assert_eq!(count, 0);
    }
    // Columns read as what they are not.
    let mut errors = Vec::new();
    client
        .query(&ITEMS_QUERY[0], &params, |row| {
            if errors.is_empty() {
                errors = [
                    row.get::<i32>(6).map(drop),
                    row.get::<i64>(0).map(drop),
                    row.get::<bool>(3).map(drop),
                    row.get::<Jsonb>(1).map(drop),
                ]
                .into_iter()
                .map(|result| result.unwrap_err().to_string())
                .collect();
            }
            Ok(())
        })
        .unwrap();
    for (error, expected) in errors.iter().zip([
        "column 6 is not int4",
        "column 0 is not int8",
        "column 3 is not bool",
        "column 1 is not jsonb",
    ]) {
        assert!(error.contains(expected), "{error}");
    }
    assert_eq!(errors.len(), 4);
}
