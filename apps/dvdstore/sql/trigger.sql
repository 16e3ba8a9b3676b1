-- The RESTOCK trigger, created after the load so that it does not fire for
-- loaded rows.
CREATE TRIGGER restock BEFORE UPDATE OF quan_in_stock ON inventory
  FOR EACH ROW EXECUTE FUNCTION restock();
