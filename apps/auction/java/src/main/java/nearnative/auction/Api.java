package nearnative.auction;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import jakarta.servlet.AsyncContext;
import jakarta.servlet.AsyncEvent;
import jakarta.servlet.AsyncListener;
import jakarta.servlet.ServletException;
import jakarta.servlet.http.Cookie;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.math.BigDecimal;
import java.sql.SQLException;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The REST/JSON API: one endpoint per request of the user model's
 * operations. Errors are an HTTP status >= 400 with {"error": "..."}.
 * Everything but login, register, images and health needs the session
 * cookie that login sets. Mapped to /auction/* in WEB-INF/web.xml.
 */
public final class Api extends HttpServlet {
    private static final Logger log = LoggerFactory.getLogger(Api.class);
    static final String COOKIE = "AUCTION_SESSION";

    private App app;

    @Override
    public void init() throws ServletException {
        app = (App) getServletContext().getAttribute(App.ATTR);
        if (app == null) {
            throw new ServletException("the application did not start (see the log above)");
        }
    }

    /** A client error: the status and the message for the body. */
    static final class HttpError extends Exception {
        final int status;

        HttpError(int status, String msg) {
            super(msg);
            this.status = status;
        }
    }

    private static final Pattern USER = Pattern.compile("/user/(\\d+)");
    private static final Pattern LEAVE = Pattern.compile("/live/auction/(\\d+)/leave");
    private static final Pattern AUCTION = Pattern.compile("/auction/(\\d+)");
    private static final Pattern ITEMS_OF_AUCTION = Pattern.compile("/item/auction/(\\d+)");
    private static final Pattern CURRENT_ITEM = Pattern.compile("/item/current/auction/(\\d+)");
    private static final Pattern ITEM = Pattern.compile("/item/(\\d+)");
    private static final Pattern ITEM_IMAGE = Pattern.compile("/item/(\\d+)/image");
    private static final Pattern PURCHASED = Pattern.compile("/item/user/(\\d+)/purchased");
    private static final Pattern NEXT_BID = Pattern.compile("/bid/auction/(\\d+)/item/(\\d+)/count/(\\d+)");
    private static final Pattern BIDS_OF_USER = Pattern.compile("/bid/user/(\\d+)");
    private static final Pattern ATTENDANCE = Pattern.compile("/attendance/user/(\\d+)");
    private static final Pattern IMAGE = Pattern.compile("/image/(\\d+)/(thumb|preview|full)");

    @Override
    protected void service(HttpServletRequest req, HttpServletResponse resp) throws IOException {
        String path = req.getPathInfo() == null ? "/" : req.getPathInfo();
        String method = req.getMethod();
        try {
            Object out = route(method, path, req, resp);
            if (out != null) {
                write(resp, 200, out);
            }
        } catch (HttpError e) {
            write(resp, e.status, new Model.Error(e.getMessage()));
        } catch (Store.NotFound e) {
            write(resp, 404, new Model.Error(e.getMessage()));
        } catch (Store.Conflict e) {
            write(resp, 409, new Model.Error(e.getMessage()));
        } catch (JsonProcessingException | IllegalArgumentException e) {
            write(resp, 400, new Model.Error(method + " " + path + ": bad request: " + e.getMessage()));
        } catch (SQLException e) {
            log.warn("{} {}: {}", method, path, e.toString());
            write(resp, 500, new Model.Error(method + " " + path + ": database: " + e.getMessage()));
        } catch (Exception e) {
            log.warn("{} {}", method, path, e);
            write(resp, 500, new Model.Error(method + " " + path + ": " + e));
        }
    }

    /** Handles one request; returns the body to write, or null when the handler answered (or will, async). */
    private Object route(String method, String path, HttpServletRequest req, HttpServletResponse resp)
            throws Exception {
        Matcher m;
        switch (method) {
            case "GET":
                if (path.equals("/health")) {
                    return health();
                }
                if ((m = IMAGE.matcher(path)).matches()) {
                    image(resp, Long.parseLong(m.group(1)), m.group(2));
                    return null;
                }
                long uid = session(req);
                if (path.equals("/logout")) {
                    app.store.logout(uid);
                    Cookie c = new Cookie(COOKIE, "");
                    c.setPath("/");
                    c.setMaxAge(0);
                    resp.addCookie(c);
                    return Map.of("loggedOut", uid);
                }
                if ((m = USER.matcher(path)).matches()) {
                    return app.store.user(Long.parseLong(m.group(1)));
                }
                if (path.equals("/live/auction")) {
                    return app.store.activeAuctions(page(req), pageSize(req));
                }
                if ((m = AUCTION.matcher(path)).matches()) {
                    return app.store.auction(Long.parseLong(m.group(1)));
                }
                if ((m = ITEMS_OF_AUCTION.matcher(path)).matches()) {
                    return app.store.itemsOfAuction(Long.parseLong(m.group(1)), page(req), pageSize(req));
                }
                if ((m = CURRENT_ITEM.matcher(path)).matches()) {
                    return currentItem(Long.parseLong(m.group(1)));
                }
                if ((m = ITEM.matcher(path)).matches()) {
                    return app.store.item(Long.parseLong(m.group(1)));
                }
                if ((m = PURCHASED.matcher(path)).matches()) {
                    return app.store.purchaseHistory(Long.parseLong(m.group(1)), page(req), pageSize(req));
                }
                if ((m = NEXT_BID.matcher(path)).matches()) {
                    nextBid(req, resp, Long.parseLong(m.group(1)), Long.parseLong(m.group(2)),
                            Integer.parseInt(m.group(3)));
                    return null;
                }
                if ((m = BIDS_OF_USER.matcher(path)).matches()) {
                    return app.store.bidHistory(Long.parseLong(m.group(1)), page(req), pageSize(req));
                }
                if ((m = ATTENDANCE.matcher(path)).matches()) {
                    return app.store.attendanceHistory(Long.parseLong(m.group(1)), page(req), pageSize(req));
                }
                break;
            case "POST":
                if (path.equals("/login")) {
                    return login(req, resp);
                }
                if (path.equals("/user")) {
                    JsonNode b = body(req);
                    return app.store.register(text(b, "email"), text(b, "password"), text(b, "firstName"),
                            text(b, "lastName"), decimal(b, "creditLimit"));
                }
                long me = session(req);
                if ((m = USER.matcher(path)).matches()) {
                    long id = Long.parseLong(m.group(1));
                    if (id != me) {
                        throw new HttpError(403, "user " + me + " may not change the profile of user " + id);
                    }
                    JsonNode b = body(req);
                    return app.store.updateUser(id, optText(b, "firstName"), optText(b, "lastName"),
                            b.hasNonNull("creditLimit") ? decimal(b, "creditLimit") : null);
                }
                if (path.equals("/live/auction")) {
                    long auctionId = body(req).path("auctionId").asLong();
                    long attendance = app.store.join(me, auctionId);
                    Map<String, Object> out = new LinkedHashMap<>();
                    out.put("attendanceId", attendance);
                    out.put("auction", app.store.auction(auctionId));
                    return out;
                }
                if ((m = LEAVE.matcher(path)).matches()) {
                    long auctionId = Long.parseLong(m.group(1));
                    return Map.of("auctionId", auctionId, "left", app.store.leave(me, auctionId));
                }
                if (path.equals("/bid")) {
                    return placeBid(me, body(req));
                }
                if (path.equals("/item")) {
                    JsonNode b = body(req);
                    return app.store.addItem(me, text(b, "name"), text(b, "description"), text(b, "manufacturer"),
                            text(b, "condition"), decimal(b, "startingBid"));
                }
                if ((m = ITEM_IMAGE.matcher(path)).matches()) {
                    byte[][] sizes = Images.sizes(req.getInputStream().readAllBytes());
                    return app.store.addImage(me, Long.parseLong(m.group(1)), sizes[0], sizes[1], sizes[2]);
                }
                break;
            default:
                break;
        }
        throw new HttpError(404, "no endpoint " + method + " /auction" + path);
    }

    private Object health() throws HttpError {
        StringBuilder p = new StringBuilder();
        for (String problem : new String[] {app.broker.problem(), app.startProblem}) {
            if (problem != null) {
                p.append(p.length() > 0 ? "; " : "").append(problem);
            }
        }
        if (p.length() == 0) {
            try {
                int running = app.store.runningAuctions();
                return Map.of("status", "ok", "node", app.cfg.node(), "runningAuctions", running,
                        "liveAuctions", app.live.size());
            } catch (SQLException e) {
                p.append("database ").append(app.cfg.dbHost()).append(':').append(app.cfg.dbPort()).append(": ")
                        .append(e.getMessage());
            }
        }
        throw new HttpError(503, "node " + app.cfg.node() + " not ready: " + p);
    }

    private void image(HttpServletResponse resp, long id, String size) throws SQLException, Store.NotFound,
            IOException {
        byte[] b = app.store.image(id, size);
        resp.setStatus(200);
        resp.setContentType("image/jpeg");
        resp.setContentLength(b.length);
        // Images never change: browsers and the nginx cache may keep them.
        resp.setHeader("Cache-Control", "public, max-age=31536000, immutable");
        resp.setHeader("ETag", "\"" + id + "-" + size + "\"");
        resp.getOutputStream().write(b);
    }

    private Object login(HttpServletRequest req, HttpServletResponse resp) throws Exception {
        JsonNode b = body(req);
        String email = text(b, "email");
        Optional<String[]> s = app.store.login(email, text(b, "password"));
        if (s.isEmpty()) {
            throw new HttpError(401, "login as " + email + ": wrong email or password");
        }
        Cookie c = new Cookie(COOKIE, s.get()[0] + "-" + s.get()[1]);
        c.setPath("/");
        c.setHttpOnly(true);
        resp.addCookie(c);
        return new Model.Login(Long.parseLong(s.get()[0]), email);
    }

    /** The logged-in user of the request, checked against the database. */
    private long session(HttpServletRequest req) throws HttpError, SQLException {
        Cookie[] cs = req.getCookies();
        if (cs != null) {
            for (Cookie c : cs) {
                if (!COOKIE.equals(c.getName())) {
                    continue;
                }
                String v = c.getValue();
                int i = v.indexOf('-');
                if (i > 0) {
                    try {
                        long id = Long.parseLong(v.substring(0, i));
                        if (app.store.checkSession(id, v.substring(i + 1))) {
                            return id;
                        }
                    } catch (NumberFormatException e) {
                        // reported below
                    }
                }
                throw new HttpError(401, "session expired or invalid: log in again");
            }
        }
        throw new HttpError(401, "not logged in");
    }

    private Model.Item currentItem(long auctionId) throws Exception {
        ItemState s = app.live.current(auctionId);
        if (s == null) {
            Model.Auction a = app.store.auction(auctionId);
            if (a.currentItemId() == null || !"RUNNING".equals(a.state())) {
                throw new HttpError(409, "auction " + auctionId + " is not running (" + a.state() + ")");
            }
            return app.store.item(a.currentItemId());
        }
        return app.store.item(s.itemId());
    }

    private Model.BidResult placeBid(long me, JsonNode b) throws Exception {
        long auctionId = b.path("auctionId").asLong();
        long itemId = b.path("itemId").asLong();
        BigDecimal amount = decimal(b, "amount");
        if (amount.signum() <= 0) {
            throw new IllegalArgumentException("amount " + amount + " must be positive");
        }
        Model.BidResult r = app.store.placeBid(me, auctionId, itemId, amount);
        if ("ACCEPTED".equals(r.result())) {
            app.live.apply(r.item());
            app.broker.publish(r.item());
        }
        return r;
    }

    /** A long poll registered with Live; completed once, by a new state or the timeout. */
    private final class Poll implements Live.Waiter {
        final long auctionId;
        final long itemId;
        final int version;
        final AsyncContext ac;
        final AtomicBoolean done = new AtomicBoolean();

        Poll(long auctionId, long itemId, int version, AsyncContext ac) {
            this.auctionId = auctionId;
            this.itemId = itemId;
            this.version = version;
            this.ac = ac;
        }

        @Override
        public long itemId() {
            return itemId;
        }

        @Override
        public int version() {
            return version;
        }

        @Override
        public void complete(ItemState s) {
            if (!done.compareAndSet(false, true)) {
                return;
            }
            try {
                write((HttpServletResponse) ac.getResponse(), 200, s);
            } catch (Exception e) {
                log.debug("answering a long poll for item {}: {}", itemId, e.toString());
            } finally {
                try {
                    ac.complete();
                } catch (IllegalStateException e) {
                    // already completed by the container
                }
            }
        }
    }

    /**
     * GetNextBid: answers at once when the item has passed the client's
     * version or is closed; otherwise holds the request until it changes, or
     * for 1.5 times the item idle time (Weathervane's timeout), after which
     * it answers with the unchanged state.
     */
    private void nextBid(HttpServletRequest req, HttpServletResponse resp, long auctionId, long itemId, int version)
            throws Exception {
        ItemState s = app.live.snapshot(auctionId, itemId);
        if (s == null) {
            s = app.store.itemState(itemId).orElseThrow(() -> new Store.NotFound("no item " + itemId + " in an auction"));
        }
        if (s.auctionId() != auctionId) {
            throw new Store.NotFound("item " + itemId + " is not in auction " + auctionId);
        }
        if (s.version() > version || !s.live()) {
            write(resp, 200, s);
            return;
        }
        AsyncContext ac = req.startAsync();
        ac.setTimeout(Math.round(1.5 * app.cfg.itemIdleMillis()));
        Poll p = new Poll(auctionId, itemId, version, ac);
        ItemState last = s;
        ac.addListener(new AsyncListener() {
            @Override
            public void onTimeout(AsyncEvent ev) {
                app.live.cancel(auctionId, p);
                ItemState now = app.live.snapshot(auctionId, itemId);
                p.complete(now == null ? last : now);
            }

            @Override
            public void onError(AsyncEvent ev) {
                app.live.cancel(auctionId, p);
            }

            @Override
            public void onComplete(AsyncEvent ev) {}

            @Override
            public void onStartAsync(AsyncEvent ev) {}
        });
        app.live.await(auctionId, p);
    }

    // ---- request and response helpers ----

    private void write(HttpServletResponse resp, int status, Object body) throws IOException {
        byte[] b = app.json.writeValueAsBytes(body);
        resp.setStatus(status);
        resp.setContentType("application/json");
        resp.setContentLength(b.length);
        resp.getOutputStream().write(b);
    }

    private JsonNode body(HttpServletRequest req) throws IOException {
        JsonNode n = app.json.readTree(req.getInputStream());
        if (n == null || !n.isObject()) {
            throw new IllegalArgumentException("want a JSON object in the request body");
        }
        return n;
    }

    private static String text(JsonNode b, String field) {
        JsonNode n = b.get(field);
        if (n == null || !n.isTextual() || n.asText().isEmpty()) {
            throw new IllegalArgumentException("field " + field + " missing or not a non-empty string");
        }
        return n.asText();
    }

    private static String optText(JsonNode b, String field) {
        JsonNode n = b.get(field);
        return n == null || n.isNull() ? null : n.asText();
    }

    private static BigDecimal decimal(JsonNode b, String field) {
        JsonNode n = b.get(field);
        if (n == null || !(n.isNumber() || n.isTextual())) {
            throw new IllegalArgumentException("field " + field + " missing or not a number");
        }
        try {
            return new BigDecimal(n.asText()).setScale(2, java.math.RoundingMode.HALF_UP);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("field " + field + ": " + n.asText() + " is not a number");
        }
    }

    private int pageSize(HttpServletRequest req) {
        return intParam(req, "pageSize", app.cfg.pageSize(), 1, 100);
    }

    private static int page(HttpServletRequest req) {
        return intParam(req, "page", 0, 0, 1_000_000);
    }

    private static int intParam(HttpServletRequest req, String name, int def, int min, int max) {
        String v = req.getParameter(name);
        if (v == null || v.isEmpty()) {
            return def;
        }
        try {
            int n = Integer.parseInt(v);
            if (n >= min && n <= max) {
                return n;
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        throw new IllegalArgumentException("parameter " + name + "=" + v + ": want an integer from " + min + " to " + max);
    }
}
