-- HttpArena's database (async-db, fortunes, production-stack) in gnosis's private cluster: the `benchmark`
-- database owned by `bench` (password `bench`, SCRAM-SHA-256 over TCP), with
--   items    100,000 rows: id 1..100000, name '<word> <word> <id>', category (one of 10),
--            price 1..500, quantity 1..1000, active, tags (a jsonb array of 1 to 4 distinct
--            tags out of 10), rating_score 1..50, rating_count 1..500; no index on price,
--            so that the range query scans as it does in HttpArena;
--   fortune  200 rows: TFB's 12, then synthetic messages that each hold &, ', " and non-ASCII
--            text, every tenth a <script> element too;
--   users    4 rows, as HttpArena's seed has (production-stack's /api/me): user 42 is Alice
--            Chen, the others, their emails and plans invented here.
-- The values come from hashint8extended(id, column), so every run makes the same rows. Run by
-- `scripts/pg.sh start` as the superuser, connected to `postgres`, with TFB's 12 fortunes
-- (scripts/tfb-fortunes.sql) read in where a line says so; every statement is idempotent (a
-- re-run adds nothing).
SET client_min_messages = warning;
SET password_encryption = 'scram-sha-256';
SELECT 'CREATE ROLE bench LOGIN'
    WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'bench') \gexec
ALTER ROLE bench LOGIN PASSWORD 'bench';
SELECT 'CREATE DATABASE benchmark OWNER bench ENCODING ''UTF8'' TEMPLATE template0'
    WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'benchmark') \gexec
\connect benchmark
SET client_min_messages = warning;
SET client_encoding = 'UTF8';
SET ROLE bench;
BEGIN;
CREATE TABLE IF NOT EXISTS items (
    id integer PRIMARY KEY,
    name text NOT NULL,
    category text NOT NULL,
    price integer NOT NULL,
    quantity integer NOT NULL,
    active boolean NOT NULL,
    tags jsonb NOT NULL,
    rating_score integer NOT NULL,
    rating_count integer NOT NULL
);
INSERT INTO items
SELECT id,
       (ARRAY['Quartz', 'Nimbus', 'Vertex', 'Cobalt', 'Atlas',
              'Ember', 'Helix', 'Orbit', 'Pulse', 'Zephyr'])[1 + h1 % 10]
           || ' ' ||
       (ARRAY['Widget', 'Sensor', 'Bracket', 'Lamp', 'Kettle',
              'Drill', 'Cable', 'Valve', 'Router', 'Spindle'])[1 + h2 % 10]
           || ' ' || id,
       (ARRAY['auto', 'books', 'clothing', 'electronics', 'garden',
              'home', 'office', 'sports', 'tools', 'toys'])[1 + h3 % 10],
       1 + h4 % 500,
       1 + h5 % 1000,
       h6 % 2 = 1,
       -- 1 to 4 tags: from a start, a step coprime to 10 walks distinct ones.
       to_jsonb((ARRAY[tag.names[1 + h7 % 10],
                       tag.names[1 + (h7 + step) % 10],
                       tag.names[1 + (h7 + 2 * step) % 10],
                       tag.names[1 + (h7 + 3 * step) % 10]])[1:1 + h9 % 4]),
       1 + h10 % 50,
       1 + h11 % 500
  FROM (SELECT id,
               hashint8extended(id, 1) & 2147483647 AS h1,
               hashint8extended(id, 2) & 2147483647 AS h2,
               hashint8extended(id, 3) & 2147483647 AS h3,
               hashint8extended(id, 4) & 2147483647 AS h4,
               hashint8extended(id, 5) & 2147483647 AS h5,
               hashint8extended(id, 6) & 2147483647 AS h6,
               hashint8extended(id, 7) & 2147483647 AS h7,
               (ARRAY[1, 3, 7, 9])[1 + (hashint8extended(id, 8) & 2147483647) % 4] AS step,
               hashint8extended(id, 9) & 2147483647 AS h9,
               hashint8extended(id, 10) & 2147483647 AS h10,
               hashint8extended(id, 11) & 2147483647 AS h11
          FROM generate_series(1, 100000) AS id) AS hashed,
       (SELECT ARRAY['compact', 'eco', 'fast', 'heavy-duty', 'limited',
                     'new', 'popular', 'premium', 'sale', 'wireless'] AS names) AS tag
ON CONFLICT (id) DO NOTHING;

CREATE TABLE IF NOT EXISTS fortune (id integer PRIMARY KEY, message text NOT NULL);
-- TFB's fortunes
INSERT INTO fortune (id, message)
SELECT id,
       format('%s & %s don''t %s — "%s", as they say in %s.%s',
              (ARRAY['Cats', 'Compilers', 'Old routers', 'Tired caches', 'Night owls',
                     'Small teams', 'Bright ideas', 'Lazy loops', 'Quiet servers',
                     'Careful readers', 'Rusty gears'])[1 + id % 11],
              (ARRAY['dogs', 'linkers', 'new switches', 'fresh buffers', 'early birds',
                     'big plans', 'dim bulbs', 'eager threads', 'noisy clients',
                     'hasty writers', 'clean tools', 'long queues', 'spare keys'])[1 + id % 13],
              (ARRAY['wait for the tide', 'argue about tabs', 'forget their keys',
                     'count every byte', 'sleep through alarms', 'read the manual',
                     'share one lock'])[1 + id % 7],
              (ARRAY['less is more', 'measure twice', 'it works on my machine', 'ship it',
                     'all is well', 'trust but verify', 'fail fast', 'slow & steady'])[1 + id % 8],
              (ARRAY['the café', 'a naïve village', 'Ελλάδα', '日本のことわざ',
                     'the smörgåsbord', 'Straße 5', 'the jalapeño fields',
                     'Köln ☕'])[1 + (id + id / 8) % 8],
              CASE WHEN id % 10 = 5 THEN format(' <script>alert(''fortune %s'')</script>', id)
                   ELSE '' END)
  FROM generate_series(13, 200) AS id
ON CONFLICT (id) DO NOTHING;

CREATE TABLE IF NOT EXISTS users (
    id integer PRIMARY KEY,
    name text NOT NULL,
    email text NOT NULL,
    plan text NOT NULL
);
INSERT INTO users (id, name, email, plan) VALUES
    (1, 'Bruno Lima', 'bruno.lima@example.com', 'free'),
    (7, 'Mei Tanaka', 'mei.tanaka@example.com', 'pro'),
    (42, 'Alice Chen', 'alice.chen@example.com', 'enterprise'),
    (99, 'Jonas Weber', 'jonas.weber@example.com', 'free')
ON CONFLICT (id) DO NOTHING;
COMMIT;
ANALYZE items;
ANALYZE fortune;
ANALYZE users;
