-- Secondary indexes, added after the bulk load (one statement per table, so
-- that each table is rebuilt once).
ALTER TABLE person ADD UNIQUE INDEX person_username (username);
ALTER TABLE socialevent ADD INDEX socialevent_time (eventtimestamp), ADD INDEX socialevent_submitter (submittername);
ALTER TABLE socialeventtag ADD UNIQUE INDEX socialeventtag_tag (tag), ADD INDEX socialeventtag_refcount (refcount);
ALTER TABLE socialeventtag_socialevent ADD INDEX setse_event (socialeventid);
ALTER TABLE person_socialevent ADD INDEX pse_username (username);
ALTER TABLE comments_rating ADD INDEX comments_event (socialeventid);
