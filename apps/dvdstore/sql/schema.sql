-- DVD Store schema (PostgreSQL), after DVD Store 2.1/3's eight tables.
-- Tables are created bare: the loader creates each one in the transaction
-- that COPYs its rows (COPY ... FREEZE, no WAL with wal_level minimal) and
-- adds keys, indexes, foreign keys and the trigger after the data
-- (indexes.sql, constraints.sql, trigger.sql).

CREATE TABLE categories (
  category     serial      NOT NULL,
  categoryname varchar(50) NOT NULL
);

CREATE TABLE products (
  prod_id        serial        NOT NULL,
  category       integer       NOT NULL,
  title          varchar(50)   NOT NULL,
  actor          varchar(50)   NOT NULL,
  price          numeric(12,2) NOT NULL,
  special        smallint      NOT NULL,
  common_prod_id integer       NOT NULL
);

CREATE TABLE inventory (
  prod_id       integer NOT NULL,
  quan_in_stock integer NOT NULL,
  sales         integer NOT NULL
);

CREATE TABLE customers (
  customerid           serial      NOT NULL,
  firstname            varchar(50) NOT NULL,
  lastname             varchar(50) NOT NULL,
  address1             varchar(50) NOT NULL,
  address2             varchar(50),
  city                 varchar(50) NOT NULL,
  state                varchar(50),
  zip                  integer,
  country              varchar(50) NOT NULL,
  region               smallint    NOT NULL,
  email                varchar(50),
  phone                varchar(50),
  creditcardtype       integer     NOT NULL,
  creditcard           varchar(50) NOT NULL,
  creditcardexpiration varchar(50) NOT NULL,
  username             varchar(50) NOT NULL,
  password             varchar(50) NOT NULL,
  age                  smallint,
  income               integer,
  gender               varchar(1)
);

CREATE TABLE orders (
  orderid     serial        NOT NULL,
  orderdate   date          NOT NULL,
  customerid  integer,
  netamount   numeric(12,2) NOT NULL,
  tax         numeric(12,2) NOT NULL,
  totalamount numeric(12,2) NOT NULL
);

CREATE TABLE orderlines (
  orderlineid smallint NOT NULL,
  orderid     integer  NOT NULL,
  prod_id     integer  NOT NULL,
  quantity    smallint NOT NULL,
  orderdate   date     NOT NULL
);

CREATE TABLE cust_hist (
  customerid integer NOT NULL,
  orderid    integer NOT NULL,
  prod_id    integer NOT NULL
);

CREATE TABLE reorder (
  prod_id        integer NOT NULL,
  date_low       date    NOT NULL,
  quan_low       integer NOT NULL,
  date_reordered date,
  quan_reordered integer,
  date_expected  date
);
