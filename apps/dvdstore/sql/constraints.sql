-- Foreign keys, added (and so checked against every loaded row) after the
-- keys exist. Independent of each other; run on parallel connections.
ALTER TABLE orders ADD CONSTRAINT fk_customerid FOREIGN KEY (customerid) REFERENCES customers (customerid) ON DELETE SET NULL;
ALTER TABLE orderlines ADD CONSTRAINT fk_orderid FOREIGN KEY (orderid) REFERENCES orders (orderid) ON DELETE CASCADE;
ALTER TABLE cust_hist ADD CONSTRAINT fk_cust_hist_customerid FOREIGN KEY (customerid) REFERENCES customers (customerid) ON DELETE CASCADE;
ALTER TABLE inventory ADD CONSTRAINT fk_inventory_prod_id FOREIGN KEY (prod_id) REFERENCES products (prod_id);
