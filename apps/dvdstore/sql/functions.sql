-- DVD Store's server-side functions (PostgreSQL, PL/pgSQL), written after
-- the public description of DVD Store 2.1/3: new customer, login with the
-- customer's recent purchases, browse by category / actor / title, and
-- purchase with a per-line stock check that rolls the whole order back.

-- new_customer inserts a customer and returns the new id, or 0 when the
-- user name is taken.
CREATE FUNCTION new_customer(
  firstname_in text, lastname_in text, address1_in text, address2_in text,
  city_in text, state_in text, zip_in integer, country_in text, region_in integer,
  email_in text, phone_in text, creditcardtype_in integer, creditcard_in text,
  creditcardexpiration_in text, username_in text, password_in text,
  age_in integer, income_in integer, gender_in text)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  id integer;
BEGIN
  IF EXISTS (SELECT 1 FROM customers WHERE username = username_in) THEN
    RETURN 0;
  END IF;
  INSERT INTO customers (firstname, lastname, address1, address2, city, state, zip,
      country, region, email, phone, creditcardtype, creditcard, creditcardexpiration,
      username, password, age, income, gender)
    VALUES (firstname_in, lastname_in, address1_in, address2_in, city_in, state_in, zip_in,
      country_in, region_in, email_in, phone_in, creditcardtype_in, creditcard_in,
      creditcardexpiration_in, username_in, password_in, age_in, income_in, gender_in)
    RETURNING customerid INTO id;
  RETURN id;
END
$$;

-- login returns the customer's id with up to ten of their most recent
-- purchases (title, actor, and the title of the related product), newest
-- first; one row with NULL titles when they have bought nothing yet; no row
-- when the user name and password do not match.
CREATE FUNCTION login(username_in text, password_in text)
RETURNS TABLE (customerid integer, title text, actor text, related_title text)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
DECLARE
  cid integer;
BEGIN
  SELECT c.customerid INTO cid FROM customers c
    WHERE c.username = username_in AND c.password = password_in;
  IF cid IS NULL THEN
    RETURN;
  END IF;
  RETURN QUERY
    SELECT cid, p.title::text, p.actor::text, r.title::text
    FROM (SELECT h.prod_id, h.orderid FROM cust_hist h
          WHERE h.customerid = cid ORDER BY h.orderid DESC LIMIT 10) recent
    JOIN products p ON p.prod_id = recent.prod_id
    LEFT JOIN products r ON r.prod_id = p.common_prod_id
    ORDER BY recent.orderid DESC;
  IF NOT FOUND THEN
    RETURN QUERY SELECT cid, NULL::text, NULL::text, NULL::text;
  END IF;
END
$$;

-- browse_by_category returns up to batch_in of the category's specials.
CREATE FUNCTION browse_by_category(category_in integer, batch_in integer)
RETURNS SETOF products LANGUAGE sql STABLE AS $$
  SELECT * FROM products WHERE category = category_in AND special = 1 LIMIT batch_in
$$;

-- browse_by_actor and browse_by_title are full-text searches: every word of
-- the search must occur (plainto_tsquery joins the words with &), through
-- the GIN indexes on to_tsvector('simple', actor) and (..., title).
-- (DVD Store 3's PostgreSQL title search searched the actor column; this one
-- searches the title.)
CREATE FUNCTION browse_by_actor(actor_in text, batch_in integer)
RETURNS SETOF products LANGUAGE sql STABLE AS $$
  SELECT * FROM products
  WHERE to_tsvector('simple', actor) @@ plainto_tsquery('simple', actor_in) LIMIT batch_in
$$;

CREATE FUNCTION browse_by_title(title_in text, batch_in integer)
RETURNS SETOF products LANGUAGE sql STABLE AS $$
  SELECT * FROM products
  WHERE to_tsvector('simple', title) @@ plainto_tsquery('simple', title_in) LIMIT batch_in
$$;

-- purchase records an order of 1 to 10 lines and returns its id. For each
-- line it locks the product's inventory row and checks the stock; when the
-- stock is short it raises SQLSTATE DS001, and the whole order (the order
-- row and every earlier line) rolls back: the client counts a rollback.
-- Rows are locked in the order of the lines, so two orders can deadlock
-- (SQLSTATE 40P01); the client retries those after a short random wait.
CREATE FUNCTION purchase(customerid_in integer, netamount_in numeric, taxamount_in numeric,
  totalamount_in numeric, prod_ids integer[], quantities integer[])
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  n integer := coalesce(array_length(prod_ids, 1), 0);
  new_orderid integer;
  stock integer;
BEGIN
  IF n < 1 OR n > 10 OR n <> coalesce(array_length(quantities, 1), 0) THEN
    RAISE EXCEPTION 'purchase: % products and % quantities, want 1 to 10 of each',
      n, coalesce(array_length(quantities, 1), 0) USING ERRCODE = 'invalid_parameter_value';
  END IF;
  INSERT INTO orders (orderdate, customerid, netamount, tax, totalamount)
    VALUES (current_date, customerid_in, netamount_in, taxamount_in, totalamount_in)
    RETURNING orderid INTO new_orderid;
  FOR i IN 1..n LOOP
    IF quantities[i] IS NULL OR quantities[i] < 1 THEN
      RAISE EXCEPTION 'purchase: line % orders % of product %', i, quantities[i], prod_ids[i]
        USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT quan_in_stock INTO stock FROM inventory WHERE prod_id = prod_ids[i] FOR UPDATE;
    IF NOT FOUND THEN
      RAISE EXCEPTION 'purchase: no product %', prod_ids[i] USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF stock < quantities[i] THEN
      RAISE EXCEPTION 'insufficient stock for product %: % in stock, % ordered',
        prod_ids[i], stock, quantities[i] USING ERRCODE = 'DS001';
    END IF;
    UPDATE inventory SET quan_in_stock = quan_in_stock - quantities[i], sales = sales + quantities[i]
      WHERE prod_id = prod_ids[i];
    INSERT INTO orderlines (orderlineid, orderid, prod_id, quantity, orderdate)
      VALUES (i, new_orderid, prod_ids[i], quantities[i], current_date);
    INSERT INTO cust_hist (customerid, orderid, prod_id) VALUES (customerid_in, new_orderid, prod_ids[i]);
  END LOOP;
  RETURN new_orderid;
END
$$;

-- restock is the RESTOCK trigger's function: an update that would leave
-- fewer than 3 in stock records a REORDER row and sets the stock back to
-- 250, which keeps the rollback rate steady over a run.
CREATE FUNCTION restock() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.quan_in_stock < 3 THEN
    INSERT INTO reorder (prod_id, date_low, quan_low, date_reordered, quan_reordered, date_expected)
      VALUES (NEW.prod_id, current_date, NEW.quan_in_stock, current_date,
              250 - NEW.quan_in_stock, current_date + 7);
    NEW.quan_in_stock := 250;
  END IF;
  RETURN NEW;
END
$$;
