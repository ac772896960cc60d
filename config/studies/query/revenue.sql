-- Revenue by region over one quarter: a join the optimizer can run by hash, by nested loops over the
-- customer index, or by scanning orders.
SELECT r.name, COUNT(*) AS orders, SUM(o.amount) AS revenue
FROM orders o
JOIN customers c ON c.id = o.customer
JOIN regions r ON r.id = c.region
WHERE o.day BETWEEN 90 AND 180 AND c.segment < 3
GROUP BY r.name
ORDER BY revenue DESC;
