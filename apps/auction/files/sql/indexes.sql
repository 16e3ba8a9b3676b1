-- Keys and indexes, built after the bulk load; then the identity sequences
-- continue after the loaded ids.
ALTER TABLE users ADD PRIMARY KEY (id);
CREATE UNIQUE INDEX users_email ON users (email);
ALTER TABLE auction ADD PRIMARY KEY (id);
CREATE INDEX auction_live ON auction (id) WHERE current;
ALTER TABLE item ADD PRIMARY KEY (id);
CREATE INDEX item_auction ON item (auction_id, seq);
ALTER TABLE bid ADD PRIMARY KEY (id);
CREATE INDEX bid_bidder ON bid (bidder_id, placed_at DESC);
CREATE INDEX bid_item ON bid (item_id);
ALTER TABLE purchase ADD PRIMARY KEY (id);
CREATE INDEX purchase_user ON purchase (user_id, purchased_at DESC);
ALTER TABLE attendance ADD PRIMARY KEY (id);
CREATE INDEX attendance_user ON attendance (user_id, joined_at DESC);
ALTER TABLE image ADD PRIMARY KEY (id);
CREATE INDEX image_item ON image (item_id, idx);

SELECT setval(pg_get_serial_sequence('users', 'id'), greatest(1, (SELECT max(id) FROM users)));
SELECT setval(pg_get_serial_sequence('auction', 'id'), greatest(1, (SELECT max(id) FROM auction)));
SELECT setval(pg_get_serial_sequence('item', 'id'), greatest(1, (SELECT max(id) FROM item)));
SELECT setval(pg_get_serial_sequence('bid', 'id'), greatest(1, (SELECT max(id) FROM bid)));
SELECT setval(pg_get_serial_sequence('purchase', 'id'), greatest(1, (SELECT max(id) FROM purchase)));
SELECT setval(pg_get_serial_sequence('attendance', 'id'), greatest(1, (SELECT max(id) FROM attendance)));
SELECT setval(pg_get_serial_sequence('image', 'id'), greatest(1, (SELECT max(id) FROM image)));
