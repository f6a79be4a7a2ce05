-- SQLite workload with deterministic output: tables filled by recursive CTEs,
-- indexes, joins, GROUP BY, window functions, string building, updates and deletes.
-- Row counts scale with the parameter @n (set by the caller:
--   sqlite3 -cmd '.parameter set @n 200000' :memory: < workload.sql).
-- The database is in memory, so every page of it is a block from malloc too
-- (SQLite's page cache allocates through the system allocator).
.headers off
.mode list
PRAGMA cache_size = -65536;

CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT, region INTEGER, score REAL);
CREATE TABLE orders(id INTEGER PRIMARY KEY, customer INTEGER, amount INTEGER, note TEXT);
CREATE TABLE tags(order_id INTEGER, tag TEXT);

WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < @n / 10)
INSERT INTO customers
SELECT i, 'customer-' || printf('%08d', (i * 7919) % 1000003), i % 37, ((i * 2654435761) % 1000) / 10.0 FROM c;

WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < @n)
INSERT INTO orders
SELECT i, 1 + (i * 48271) % (@n / 10), (i * 69621) % 10007,
       substr(printf('%x-%x', i * 31, i % 977) || '-' || replace(printf('%.*c', i % 40, 'x'), ' ', 'y'), 1, 64)
FROM c;

WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < @n * 2)
INSERT INTO tags SELECT 1 + (i * 16807) % @n, 'tag' || (i % 101) FROM c;

CREATE INDEX orders_customer ON orders(customer);
CREATE INDEX orders_amount ON orders(amount, id);
CREATE INDEX tags_order ON tags(order_id, tag);
CREATE INDEX customers_region ON customers(region, score);

SELECT 'counts', (SELECT count(*) FROM customers), (SELECT count(*) FROM orders), (SELECT count(*) FROM tags);

SELECT 'by-region', c.region, count(*), sum(o.amount), max(o.amount), min(length(o.note))
FROM orders o JOIN customers c ON c.id = o.customer
GROUP BY c.region ORDER BY c.region LIMIT 8;

SELECT 'top-customers', c.name, t.total
FROM (SELECT customer, sum(amount) AS total FROM orders GROUP BY customer) t
JOIN customers c ON c.id = t.customer
ORDER BY t.total DESC, c.id LIMIT 5;

SELECT 'tags', tag, count(DISTINCT order_id) FROM tags GROUP BY tag ORDER BY 3 DESC, 1 LIMIT 5;

SELECT 'window', sum(r) FROM (
  SELECT row_number() OVER (PARTITION BY customer ORDER BY amount DESC, id) AS r FROM orders
) WHERE r <= 3;

SELECT 'strings', count(*), sum(length(s)), max(length(s)), min(substr(s, 1, 20)) FROM (
  SELECT group_concat(note, ',') AS s FROM orders GROUP BY customer % 1000
);

SELECT 'distinct-notes', count(DISTINCT substr(note, 1, 12)) FROM orders;

UPDATE orders SET note = note || upper(note) WHERE id % 3 = 0;
DELETE FROM tags WHERE (order_id + length(tag)) % 5 = 0;
DELETE FROM orders WHERE amount < 2000;
SELECT 'after-update', count(*), sum(length(note)), total(amount) FROM orders;
SELECT 'after-delete', count(*), count(DISTINCT order_id) FROM tags;

SELECT 'join3', count(*), sum(o.amount % 97) FROM tags t
JOIN orders o ON o.id = t.order_id
JOIN customers c ON c.id = o.customer
WHERE c.score > 50.0;

CREATE TABLE summary AS
SELECT customer, count(*) AS n, group_concat(id) AS ids FROM orders GROUP BY customer;
SELECT 'summary', count(*), sum(n), sum(length(ids)) FROM summary;
PRAGMA integrity_check;
