-- Study 10's data: a star-like schema small enough for a 2-core machine (about 60 MB in InnoDB),
-- larger than the cold cells' 16M buffer pool / shared_buffers. Standard SQL for MariaDB and PostgreSQL.
CREATE TABLE digits (d INT PRIMARY KEY);
INSERT INTO digits VALUES (0), (1), (2), (3), (4), (5), (6), (7), (8), (9);
CREATE TABLE regions (id INT PRIMARY KEY, name VARCHAR(40) NOT NULL);
INSERT INTO regions SELECT d, CONCAT('region ', d) FROM digits;
CREATE TABLE customers (id INT PRIMARY KEY, region INT NOT NULL, segment INT NOT NULL, name VARCHAR(60) NOT NULL);
INSERT INTO customers
  SELECT a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 1, (a.d * 7 + b.d) % 10, c.d % 5,
         CONCAT('customer ', a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 1)
  FROM digits a, digits b, digits c, digits e;
CREATE INDEX customers_region ON customers (region);
CREATE TABLE orders (id INT PRIMARY KEY, customer INT NOT NULL, day INT NOT NULL, amount INT NOT NULL,
                     note VARCHAR(200) NOT NULL);
INSERT INTO orders
  SELECT c.id * 40 + k.n, c.id, (c.id * 13 + k.n * 7) % 365, (c.id * 31 + k.n * 17) % 1000, REPEAT('n', 120)
  FROM customers c, (SELECT a.d + 10 * b.d AS n FROM digits a, digits b WHERE a.d + 10 * b.d < 40) k;
CREATE INDEX orders_customer ON orders (customer);
CREATE INDEX orders_day ON orders (day);
