package nearnative.auction;

import java.math.BigDecimal;
import java.security.SecureRandom;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Types;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Optional;
import javax.sql.DataSource;

/**
 * Every database operation of the application. PostgreSQL holds users,
 * auctions, items and bids, and is also the store for images and the bid,
 * attendance and purchase history (the schema is apps/auction/files/sql).
 */
final class Store {
    private final DataSource ds;
    private final SecureRandom random = new SecureRandom();

    Store(DataSource ds) {
        this.ds = ds;
    }

    /** Thrown for a request that names something that does not exist. */
    static final class NotFound extends Exception {
        NotFound(String msg) {
            super(msg);
        }
    }

    /** Thrown for a request the current state does not allow. */
    static final class Conflict extends Exception {
        Conflict(String msg) {
            super(msg);
        }
    }

    // ---- health ----

    int runningAuctions() throws SQLException {
        try (Connection c = ds.getConnection();
                Statement s = c.createStatement();
                ResultSet rs = s.executeQuery("SELECT count(*) FROM auction WHERE state = 'RUNNING'")) {
            rs.next();
            return rs.getInt(1);
        }
    }

    // ---- live auctions ----

    private static final String ITEM_STATE_COLS =
            "i.auction_id, i.id, a.rounds, i.seq, i.state, i.version, i.bid_count, i.high_amount, i.high_bidder,"
                    + " (extract(epoch from i.changed_at) * 1000)::bigint";

    private static ItemState itemState(ResultSet rs) throws SQLException {
        long bidder = rs.getLong(9);
        Long bidderId = rs.wasNull() ? null : bidder;
        return new ItemState(rs.getLong(1), rs.getLong(2), rs.getInt(3), rs.getInt(4), rs.getString(5),
                rs.getInt(6), rs.getInt(7), rs.getBigDecimal(8), bidderId, rs.getLong(10));
    }

    /**
     * Starts the current auctions that are still PENDING (the template holds
     * them so): each opens its first item. The first application server to
     * come up does it; the others find nothing left to start.
     */
    List<ItemState> startPendingAuctions() throws SQLException {
        List<ItemState> opened = new ArrayList<>();
        try (Connection c = ds.getConnection()) {
            c.setAutoCommit(false);
            try {
                List<Long> ids = new ArrayList<>();
                try (PreparedStatement ps = c.prepareStatement(
                        "SELECT id FROM auction WHERE current AND state = 'PENDING' ORDER BY id FOR UPDATE");
                        ResultSet rs = ps.executeQuery()) {
                    while (rs.next()) {
                        ids.add(rs.getLong(1));
                    }
                }
                for (long id : ids) {
                    opened.add(openNext(c, id, -1));
                }
                c.commit();
            } catch (SQLException e) {
                c.rollback();
                throw e;
            }
        }
        return opened;
    }

    /** The current item of every running auction. */
    List<ItemState> currentItems() throws SQLException {
        List<ItemState> out = new ArrayList<>();
        try (Connection c = ds.getConnection();
                PreparedStatement ps = c.prepareStatement("SELECT " + ITEM_STATE_COLS
                        + " FROM auction a JOIN item i ON i.id = a.current_item_id WHERE a.state = 'RUNNING'");
                ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                out.add(itemState(rs));
            }
        }
        return out;
    }

    /** The bidding state of one item, or empty when there is no such item in an auction. */
    Optional<ItemState> itemState(long itemId) throws SQLException {
        try (Connection c = ds.getConnection();
                PreparedStatement ps = c.prepareStatement("SELECT " + ITEM_STATE_COLS
                        + " FROM item i JOIN auction a ON a.id = i.auction_id WHERE i.id = ?")) {
            ps.setLong(1, itemId);
            try (ResultSet rs = ps.executeQuery()) {
                return rs.next() ? Optional.of(itemState(rs)) : Optional.empty();
            }
        }
    }

    /**
     * Moves an idle item on: OPEN becomes LASTCALL, LASTCALL becomes SOLD (or
     * NOTSOLD without bids) and the auction's next item opens; an auction out
     * of items starts over with all of them (a new round), as Weathervane's
     * auctioneer does. The guard on state, version and idle time lets every
     * application server try: exactly one succeeds, the others change
     * nothing. Returns the new states to broadcast, empty when nothing changed.
     */
    List<ItemState> advance(ItemState cur, long idleMillis) throws SQLException {
        List<ItemState> changed = new ArrayList<>();
        try (Connection c = ds.getConnection()) {
            c.setAutoCommit(false);
            try {
                String next = ItemState.OPEN.equals(cur.state()) ? "'LASTCALL'"
                        : "CASE WHEN i.bid_count > 0 THEN 'SOLD' ELSE 'NOTSOLD' END";
                ItemState after;
                try (PreparedStatement ps = c.prepareStatement("UPDATE item i SET state = " + next
                        + ", version = i.version + 1, changed_at = now() FROM auction a"
                        + " WHERE i.id = ? AND a.id = i.auction_id AND i.state = ? AND i.version = ?"
                        + " AND i.changed_at <= now() - make_interval(secs => ?) RETURNING " + ITEM_STATE_COLS)) {
                    ps.setLong(1, cur.itemId());
                    ps.setString(2, cur.state());
                    ps.setInt(3, cur.version());
                    ps.setDouble(4, idleMillis / 1000.0);
                    try (ResultSet rs = ps.executeQuery()) {
                        if (!rs.next()) {
                            c.rollback();
                            return changed;
                        }
                        after = itemState(rs);
                    }
                }
                changed.add(after);
                if (!after.live()) {
                    if (ItemState.SOLD.equals(after.state())) {
                        try (PreparedStatement ps = c.prepareStatement("INSERT INTO purchase"
                                + " (user_id, item_id, auction_id, price, purchased_at) VALUES (?, ?, ?, ?, now())")) {
                            ps.setLong(1, after.bidderId());
                            ps.setLong(2, after.itemId());
                            ps.setLong(3, after.auctionId());
                            ps.setBigDecimal(4, after.amount());
                            ps.executeUpdate();
                        }
                    }
                    changed.add(openNext(c, after.auctionId(), after.seq()));
                }
                c.commit();
            } catch (SQLException e) {
                c.rollback();
                throw e;
            }
        }
        return changed;
    }

    /**
     * Opens the item after seq in the auction (the first when seq < 0),
     * starting a new round with all items when there is none, and makes it
     * the auction's current item. Runs in c's transaction.
     */
    private ItemState openNext(Connection c, long auctionId, int seq) throws SQLException {
        Long nextId = null;
        try (PreparedStatement ps = c.prepareStatement(
                "SELECT id FROM item WHERE auction_id = ? AND seq > ? ORDER BY seq LIMIT 1")) {
            ps.setLong(1, auctionId);
            ps.setInt(2, seq);
            try (ResultSet rs = ps.executeQuery()) {
                if (rs.next()) {
                    nextId = rs.getLong(1);
                }
            }
        }
        if (nextId == null) {
            try (PreparedStatement ps = c.prepareStatement("UPDATE item SET state = 'PENDING', high_amount = NULL,"
                    + " high_bidder = NULL, bid_count = 0, version = version + 1, changed_at = now()"
                    + " WHERE auction_id = ?")) {
                ps.setLong(1, auctionId);
                ps.executeUpdate();
            }
            try (PreparedStatement ps = c.prepareStatement("UPDATE auction SET rounds = rounds + 1 WHERE id = ?")) {
                ps.setLong(1, auctionId);
                ps.executeUpdate();
            }
            try (PreparedStatement ps = c.prepareStatement(
                    "SELECT id FROM item WHERE auction_id = ? ORDER BY seq LIMIT 1")) {
                ps.setLong(1, auctionId);
                try (ResultSet rs = ps.executeQuery()) {
                    if (!rs.next()) {
                        throw new SQLException("auction " + auctionId + " has no items");
                    }
                    nextId = rs.getLong(1);
                }
            }
        }
        try (PreparedStatement ps = c.prepareStatement("UPDATE auction SET state = 'RUNNING', current_item_id = ?,"
                + " start_time = CASE WHEN state = 'PENDING' THEN now() ELSE start_time END WHERE id = ?")) {
            ps.setLong(1, nextId);
            ps.setLong(2, auctionId);
            ps.executeUpdate();
        }
        try (PreparedStatement ps = c.prepareStatement("UPDATE item i SET state = 'OPEN', high_amount = NULL,"
                + " high_bidder = NULL, bid_count = 0, version = i.version + 1, changed_at = now() FROM auction a"
                + " WHERE i.id = ? AND a.id = i.auction_id RETURNING " + ITEM_STATE_COLS)) {
            ps.setLong(1, nextId);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                return itemState(rs);
            }
        }
    }

    /**
     * Validates and records a bid: the item must be the auction's open item,
     * the bidder not already the high bidder, and the amount above the high
     * bid (or at least the starting bid). Rejected bids are recorded too.
     */
    Model.BidResult placeBid(long userId, long auctionId, long itemId, BigDecimal amount)
            throws SQLException, NotFound {
        try (Connection c = ds.getConnection()) {
            c.setAutoCommit(false);
            try {
                ItemState cur;
                BigDecimal starting;
                try (PreparedStatement ps = c.prepareStatement("SELECT " + ITEM_STATE_COLS
                        + ", i.starting_bid FROM item i JOIN auction a ON a.id = i.auction_id WHERE i.id = ?"
                        + " FOR UPDATE OF i")) {
                    ps.setLong(1, itemId);
                    try (ResultSet rs = ps.executeQuery()) {
                        if (!rs.next()) {
                            throw new NotFound("no item " + itemId + " in an auction");
                        }
                        cur = itemState(rs);
                        starting = rs.getBigDecimal(11);
                    }
                }
                String reason = null;
                if (cur.auctionId() != auctionId) {
                    reason = "item " + itemId + " is not in auction " + auctionId;
                } else if (!cur.live()) {
                    reason = "item " + itemId + " is not open for bids (" + cur.state() + ")";
                } else if (cur.bidderId() != null && cur.bidderId() == userId) {
                    reason = "already the high bidder";
                } else if (cur.amount() == null ? amount.compareTo(starting) < 0 : amount.compareTo(cur.amount()) <= 0) {
                    reason = "amount " + amount + " is not above the high bid "
                            + (cur.amount() == null ? "(starting bid " + starting + ")" : cur.amount().toString());
                }
                try (PreparedStatement ps = c.prepareStatement("INSERT INTO bid"
                        + " (item_id, auction_id, bidder_id, amount, placed_at, state) VALUES (?, ?, ?, ?, now(), ?)")) {
                    ps.setLong(1, itemId);
                    ps.setLong(2, cur.auctionId());
                    ps.setLong(3, userId);
                    ps.setBigDecimal(4, amount);
                    ps.setString(5, reason == null ? "ACCEPTED" : "REJECTED");
                    ps.executeUpdate();
                }
                if (reason != null) {
                    c.commit();
                    return new Model.BidResult("REJECTED", reason, cur);
                }
                ItemState after;
                try (PreparedStatement ps = c.prepareStatement("UPDATE item i SET high_amount = ?, high_bidder = ?,"
                        + " bid_count = i.bid_count + 1, version = i.version + 1, state = 'OPEN', changed_at = now()"
                        + " FROM auction a WHERE i.id = ? AND a.id = i.auction_id RETURNING " + ITEM_STATE_COLS)) {
                    ps.setBigDecimal(1, amount);
                    ps.setLong(2, userId);
                    ps.setLong(3, itemId);
                    try (ResultSet rs = ps.executeQuery()) {
                        rs.next();
                        after = itemState(rs);
                    }
                }
                c.commit();
                return new Model.BidResult("ACCEPTED", null, after);
            } catch (SQLException | NotFound e) {
                c.rollback();
                throw e;
            }
        }
    }

    // ---- users and sessions ----

    /** Checks the password and gives the user a fresh session token. */
    Optional<String[]> login(String email, String password) throws SQLException {
        String token = HexFormat.of().formatHex(bytes(16));
        try (Connection c = ds.getConnection();
                PreparedStatement ps = c.prepareStatement("UPDATE users SET auth_token = ?, logged_in = true"
                        + " WHERE email = ? AND password = ? RETURNING id")) {
            ps.setString(1, token);
            ps.setString(2, email);
            ps.setString(3, password);
            try (ResultSet rs = ps.executeQuery()) {
                if (!rs.next()) {
                    return Optional.empty();
                }
                return Optional.of(new String[] {Long.toString(rs.getLong(1)), token});
            }
        }
    }

    private byte[] bytes(int n) {
        byte[] b = new byte[n];
        random.nextBytes(b);
        return b;
    }

    boolean checkSession(long userId, String token) throws SQLException {
        try (Connection c = ds.getConnection();
                PreparedStatement ps = c.prepareStatement("SELECT 1 FROM users WHERE id = ? AND auth_token = ?")) {
            ps.setLong(1, userId);
            ps.setString(2, token);
            try (ResultSet rs = ps.executeQuery()) {
                return rs.next();
            }
        }
    }

    void logout(long userId) throws SQLException {
        try (Connection c = ds.getConnection();
                PreparedStatement ps = c.prepareStatement(
                        "UPDATE users SET auth_token = NULL, logged_in = false WHERE id = ?")) {
            ps.setLong(1, userId);
            ps.executeUpdate();
        }
    }

    private static final String USER_COLS = "id, email, first_name, last_name, credit_limit, created_at, updated_at";

    private static Model.User user(ResultSet rs) throws SQLException {
        return new Model.User(rs.getLong(1), rs.getString(2), rs.getString(3), rs.getString(4),
                rs.getBigDecimal(5), rs.getObject(6, OffsetDateTime.class), rs.getObject(7, OffsetDateTime.class));
    }

    Model.User register(String email, String password, String first, String last, BigDecimal credit)
            throws SQLException, Conflict {
        try (Connection c = ds.getConnection();
                PreparedStatement ps = c.prepareStatement("INSERT INTO users"
                        + " (email, password, first_name, last_name, credit_limit, logged_in, created_at, updated_at)"
                        + " VALUES (?, ?, ?, ?, ?, false, now(), now()) ON CONFLICT (email) DO NOTHING RETURNING "
                        + USER_COLS)) {
            ps.setString(1, email);
            ps.setString(2, password);
            ps.setString(3, first);
            ps.setString(4, last);
            ps.setBigDecimal(5, credit);
            try (ResultSet rs = ps.executeQuery()) {
                if (!rs.next()) {
                    throw new Conflict("a user with email " + email + " exists");
                }
                return user(rs);
            }
        }
    }

    Model.User user(long id) throws SQLException, NotFound {
        try (Connection c = ds.getConnection();
                PreparedStatement ps = c.prepareStatement("SELECT " + USER_COLS + " FROM users WHERE id = ?")) {
            ps.setLong(1, id);
            try (ResultSet rs = ps.executeQuery()) {
                if (!rs.next()) {
                    throw new NotFound("no user " + id);
                }
                return user(rs);
            }
        }
    }

    Model.User updateUser(long id, String first, String last, BigDecimal credit) throws SQLException, NotFound {
        try (Connection c = ds.getConnection();
                PreparedStatement ps = c.prepareStatement("UPDATE users SET first_name = coalesce(?, first_name),"
                        + " last_name = coalesce(?, last_name), credit_limit = coalesce(?, credit_limit),"
                        + " updated_at = now() WHERE id = ? RETURNING " + USER_COLS)) {
            ps.setString(1, first);
            ps.setString(2, last);
            if (credit == null) {
                ps.setNull(3, Types.NUMERIC);
            } else {
                ps.setBigDecimal(3, credit);
            }
            ps.setLong(4, id);
            try (ResultSet rs = ps.executeQuery()) {
                if (!rs.next()) {
                    throw new NotFound("no user " + id);
                }
                return user(rs);
            }
        }
    }

    // ---- auctions and items ----

    private static final String AUCTION_COLS =
            "id, name, category, auctioneer_id, state, start_time, current_item_id, rounds";

    private static Model.Auction auction(ResultSet rs) throws SQLException {
        long cur = rs.getLong(7);
        Long current = rs.wasNull() ? null : cur;
        return new Model.Auction(rs.getLong(1), rs.getString(2), rs.getString(3), rs.getLong(4), rs.getString(5),
                rs.getObject(6, OffsetDateTime.class), current, rs.getInt(8));
    }

    /** A page of the running auctions, with their number (the user model picks random pages). */
    Model.Page<Model.Auction> activeAuctions(int page, int size) throws SQLException {
        List<Model.Auction> out = new ArrayList<>();
        long total;
        try (Connection c = ds.getConnection()) {
            try (PreparedStatement ps = c.prepareStatement("SELECT " + AUCTION_COLS
                    + " FROM auction WHERE current AND state = 'RUNNING' ORDER BY id LIMIT ? OFFSET ?")) {
                ps.setInt(1, size);
                ps.setInt(2, page * size);
                try (ResultSet rs = ps.executeQuery()) {
                    while (rs.next()) {
                        out.add(auction(rs));
                    }
                }
            }
            try (PreparedStatement ps = c.prepareStatement(
                    "SELECT count(*) FROM auction WHERE current AND state = 'RUNNING'");
                    ResultSet rs = ps.executeQuery()) {
                rs.next();
                total = rs.getLong(1);
            }
        }
        return new Model.Page<>(page, size, total, out);
    }

    Model.Auction auction(long id) throws SQLException, NotFound {
        try (Connection c = ds.getConnection();
                PreparedStatement ps = c.prepareStatement("SELECT " + AUCTION_COLS + " FROM auction WHERE id = ?")) {
            ps.setLong(1, id);
            try (ResultSet rs = ps.executeQuery()) {
                if (!rs.next()) {
                    throw new NotFound("no auction " + id);
                }
                return auction(rs);
            }
        }
    }

    private static final String ITEM_COLS = "i.id, i.auction_id, i.seq, i.seller_id, i.name, i.description,"
            + " i.manufacturer, i.condition, i.starting_bid, i.state, i.high_amount, i.high_bidder, i.bid_count,"
            + " i.version";

    private static Model.Item item(ResultSet rs, List<Model.Image> images) throws SQLException {
        long a = rs.getLong(2);
        Long auctionId = rs.wasNull() ? null : a;
        long b = rs.getLong(12);
        Long bidder = rs.wasNull() ? null : b;
        return new Model.Item(rs.getLong(1), auctionId, rs.getInt(3), rs.getLong(4), rs.getString(5),
                rs.getString(6), rs.getString(7), rs.getString(8), rs.getBigDecimal(9), rs.getString(10),
                rs.getBigDecimal(11), bidder, rs.getInt(13), rs.getInt(14), images);
    }

    private static List<Model.Image> images(Connection c, long itemId) throws SQLException {
        List<Model.Image> out = new ArrayList<>();
        try (PreparedStatement ps = c.prepareStatement("SELECT id FROM image WHERE item_id = ? ORDER BY idx")) {
            ps.setLong(1, itemId);
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    out.add(Model.Image.of(rs.getLong(1)));
                }
            }
        }
        return out;
    }

    Model.Item item(long id) throws SQLException, NotFound {
        try (Connection c = ds.getConnection();
                PreparedStatement ps = c.prepareStatement("SELECT " + ITEM_COLS + " FROM item i WHERE i.id = ?")) {
            ps.setLong(1, id);
            try (ResultSet rs = ps.executeQuery()) {
                if (!rs.next()) {
                    throw new NotFound("no item " + id);
                }
                return item(rs, images(c, id));
            }
        }
    }

    Model.Page<Model.Item> itemsOfAuction(long auctionId, int page, int size) throws SQLException {
        List<Model.Item> out = new ArrayList<>();
        try (Connection c = ds.getConnection();
                PreparedStatement ps = c.prepareStatement("SELECT " + ITEM_COLS
                        + " FROM item i WHERE i.auction_id = ? ORDER BY i.seq LIMIT ? OFFSET ?")) {
            ps.setLong(1, auctionId);
            ps.setInt(2, size);
            ps.setInt(3, page * size);
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    out.add(item(rs, new ArrayList<>()));
                }
            }
            for (Model.Item it : out) {
                it.images().addAll(images(c, it.id()));
            }
        }
        return new Model.Page<>(page, size, null, out);
    }

    /** Adds an item the user sells; it waits for a future auction. */
    Model.Item addItem(long sellerId, String name, String description, String manufacturer, String condition,
            BigDecimal startingBid) throws SQLException {
        try (Connection c = ds.getConnection();
                PreparedStatement ps = c.prepareStatement("INSERT INTO item AS i (auction_id, seq, seller_id, name,"
                        + " description, manufacturer, condition, starting_bid, state, bid_count, version, num_images)"
                        + " VALUES (NULL, 0, ?, ?, ?, ?, ?, ?, 'PENDING', 0, 0, 0) RETURNING " + ITEM_COLS)) {
            ps.setLong(1, sellerId);
            ps.setString(2, name);
            ps.setString(3, description);
            ps.setString(4, manufacturer);
            ps.setString(5, condition);
            ps.setBigDecimal(6, startingBid);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                return item(rs, new ArrayList<>());
            }
        }
    }

    /** Stores an uploaded image of the seller's item in its three sizes. */
    Model.Image addImage(long sellerId, long itemId, byte[] thumb, byte[] preview, byte[] full)
            throws SQLException, NotFound, Conflict {
        try (Connection c = ds.getConnection()) {
            c.setAutoCommit(false);
            try {
                int idx;
                try (PreparedStatement ps = c.prepareStatement(
                        "UPDATE item SET num_images = num_images + 1 WHERE id = ? RETURNING seller_id, num_images")) {
                    ps.setLong(1, itemId);
                    try (ResultSet rs = ps.executeQuery()) {
                        if (!rs.next()) {
                            throw new NotFound("no item " + itemId);
                        }
                        if (rs.getLong(1) != sellerId) {
                            throw new Conflict("item " + itemId + " is not sold by user " + sellerId);
                        }
                        idx = rs.getInt(2);
                    }
                }
                long id;
                try (PreparedStatement ps = c.prepareStatement("INSERT INTO image (item_id, idx, img_thumb, img_preview, img_full)"
                        + " VALUES (?, ?, ?, ?, ?) RETURNING id")) {
                    ps.setLong(1, itemId);
                    ps.setInt(2, idx);
                    ps.setBytes(3, thumb);
                    ps.setBytes(4, preview);
                    ps.setBytes(5, full);
                    try (ResultSet rs = ps.executeQuery()) {
                        rs.next();
                        id = rs.getLong(1);
                    }
                }
                c.commit();
                return Model.Image.of(id);
            } catch (SQLException | NotFound | Conflict e) {
                c.rollback();
                throw e;
            }
        }
    }

    /** The bytes of one image size ("thumb", "preview" or "full"). */
    byte[] image(long id, String size) throws SQLException, NotFound {
        if (!size.equals("thumb") && !size.equals("preview") && !size.equals("full")) {
            throw new NotFound("no image size " + size + " (want thumb, preview or full)");
        }
        try (Connection c = ds.getConnection();
                PreparedStatement ps = c.prepareStatement("SELECT img_" + size + " FROM image WHERE id = ?")) {
            ps.setLong(1, id);
            try (ResultSet rs = ps.executeQuery()) {
                if (!rs.next()) {
                    throw new NotFound("no image " + id);
                }
                return rs.getBytes(1);
            }
        }
    }

    // ---- attendance ----

    long join(long userId, long auctionId) throws SQLException, NotFound, Conflict {
        try (Connection c = ds.getConnection()) {
            try (PreparedStatement ps = c.prepareStatement("SELECT state FROM auction WHERE id = ?")) {
                ps.setLong(1, auctionId);
                try (ResultSet rs = ps.executeQuery()) {
                    if (!rs.next()) {
                        throw new NotFound("no auction " + auctionId);
                    }
                    if (!"RUNNING".equals(rs.getString(1))) {
                        throw new Conflict("auction " + auctionId + " is not running (" + rs.getString(1) + ")");
                    }
                }
            }
            try (PreparedStatement ps = c.prepareStatement(
                    "INSERT INTO attendance (user_id, auction_id, joined_at) VALUES (?, ?, now()) RETURNING id")) {
                ps.setLong(1, userId);
                ps.setLong(2, auctionId);
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    return rs.getLong(1);
                }
            }
        }
    }

    int leave(long userId, long auctionId) throws SQLException {
        try (Connection c = ds.getConnection();
                PreparedStatement ps = c.prepareStatement("UPDATE attendance SET left_at = now()"
                        + " WHERE user_id = ? AND auction_id = ? AND left_at IS NULL")) {
            ps.setLong(1, userId);
            ps.setLong(2, auctionId);
            return ps.executeUpdate();
        }
    }

    // ---- history ----

    Model.Page<Model.Bid> bidHistory(long userId, int page, int size) throws SQLException {
        List<Model.Bid> out = new ArrayList<>();
        try (Connection c = ds.getConnection();
                PreparedStatement ps = c.prepareStatement("SELECT b.id, b.auction_id, b.item_id, i.name, b.amount,"
                        + " b.placed_at, b.state FROM bid b JOIN item i ON i.id = b.item_id WHERE b.bidder_id = ?"
                        + " ORDER BY b.placed_at DESC, b.id DESC LIMIT ? OFFSET ?")) {
            ps.setLong(1, userId);
            ps.setInt(2, size);
            ps.setInt(3, page * size);
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    out.add(new Model.Bid(rs.getLong(1), rs.getLong(2), rs.getLong(3), rs.getString(4),
                            rs.getBigDecimal(5), rs.getObject(6, OffsetDateTime.class), rs.getString(7)));
                }
            }
        }
        return new Model.Page<>(page, size, null, out);
    }

    Model.Page<Model.Attendance> attendanceHistory(long userId, int page, int size) throws SQLException {
        List<Model.Attendance> out = new ArrayList<>();
        try (Connection c = ds.getConnection();
                PreparedStatement ps = c.prepareStatement("SELECT t.id, t.auction_id, a.name, t.joined_at, t.left_at"
                        + " FROM attendance t JOIN auction a ON a.id = t.auction_id WHERE t.user_id = ?"
                        + " ORDER BY t.joined_at DESC, t.id DESC LIMIT ? OFFSET ?")) {
            ps.setLong(1, userId);
            ps.setInt(2, size);
            ps.setInt(3, page * size);
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    out.add(new Model.Attendance(rs.getLong(1), rs.getLong(2), rs.getString(3),
                            rs.getObject(4, OffsetDateTime.class), rs.getObject(5, OffsetDateTime.class)));
                }
            }
        }
        return new Model.Page<>(page, size, null, out);
    }

    Model.Page<Model.Purchase> purchaseHistory(long userId, int page, int size) throws SQLException {
        List<Model.Purchase> out = new ArrayList<>();
        try (Connection c = ds.getConnection()) {
            try (PreparedStatement ps = c.prepareStatement("SELECT p.id, p.auction_id, p.item_id, i.name, p.price,"
                    + " p.purchased_at FROM purchase p JOIN item i ON i.id = p.item_id WHERE p.user_id = ?"
                    + " ORDER BY p.purchased_at DESC, p.id DESC LIMIT ? OFFSET ?")) {
                ps.setLong(1, userId);
                ps.setInt(2, size);
                ps.setInt(3, page * size);
                try (ResultSet rs = ps.executeQuery()) {
                    while (rs.next()) {
                        out.add(new Model.Purchase(rs.getLong(1), rs.getLong(2), rs.getLong(3), rs.getString(4),
                                rs.getBigDecimal(5), rs.getObject(6, OffsetDateTime.class), new ArrayList<>()));
                    }
                }
            }
            for (Model.Purchase p : out) {
                p.images().addAll(images(c, p.itemId()));
            }
        }
        return new Model.Page<>(page, size, null, out);
    }
}
