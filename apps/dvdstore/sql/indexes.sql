-- Keys and indexes, built after the data. Each statement is independent of
-- the others; the loader runs them on parallel connections.
ALTER TABLE categories ADD CONSTRAINT categories_pkey PRIMARY KEY (category);
ALTER TABLE products ADD CONSTRAINT products_pkey PRIMARY KEY (prod_id);
ALTER TABLE inventory ADD CONSTRAINT inventory_pkey PRIMARY KEY (prod_id);
ALTER TABLE customers ADD CONSTRAINT customers_pkey PRIMARY KEY (customerid);
ALTER TABLE orders ADD CONSTRAINT orders_pkey PRIMARY KEY (orderid);
ALTER TABLE orderlines ADD CONSTRAINT orderlines_pkey PRIMARY KEY (orderid, orderlineid);
CREATE UNIQUE INDEX ix_cust_username ON customers (username);
CREATE INDEX ix_cust_un_pw ON customers (username, password);
CREATE INDEX ix_cust_hist_customerid ON cust_hist (customerid);
CREATE INDEX ix_order_custid ON orders (customerid);
CREATE INDEX ix_prod_category_special ON products (category, special);
CREATE INDEX ix_prod_actor_fts ON products USING gin (to_tsvector('simple', actor));
CREATE INDEX ix_prod_title_fts ON products USING gin (to_tsvector('simple', title));
