package nearnative.auction;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The live auctions as this application server sees them: the current item
 * of every running auction, the long polls (GetNextBid) waiting for a change
 * of an item, and the clock that moves idle items on.
 *
 * <p>Every change reaches every server through the broker (Broker), so a
 * bid accepted by one server wakes the long polls held by all of them. The
 * database arbitrates: bids lock the item's row, and an idle item is moved
 * on by a guarded UPDATE that exactly one server wins (Store.advance), so
 * no server owns an auction and none needs a coordination service.
 */
final class Live implements AutoCloseable {
    private static final Logger log = LoggerFactory.getLogger(Live.class);

    /** How often the clock looks for idle items. */
    private static final long TICK_MILLIS = 100;
    /** How long a server waits before retrying a move another server may have made. */
    private static final long RETRY_MILLIS = 250;
    /** How often the current items are re-read, in case a broadcast was lost. */
    private static final long RESYNC_MILLIS = 5000;
    private static final int CLOSED_KEPT = 10_000;

    /** A long poll waiting for item itemId to pass version. */
    interface Waiter {
        long itemId();

        int version();

        /** Completes the poll with s; called at most once. */
        void complete(ItemState s);
    }

    private static final class Entry {
        ItemState cur;
        long nextTry;
        boolean inFlight;
        final List<Waiter> waiters = new ArrayList<>();
    }

    private final Store store;
    private final long idleMillis;
    private final Consumer<ItemState> publish;
    private final ConcurrentHashMap<Long, Entry> auctions = new ConcurrentHashMap<>();
    private final Map<Long, ItemState> closed = new LinkedHashMap<>(1024, 0.75f, false) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<Long, ItemState> e) {
            return size() > CLOSED_KEPT;
        }
    };
    private final ScheduledExecutorService clock = Executors.newSingleThreadScheduledExecutor(r -> daemon(r, "auction-clock"));
    private final ExecutorService movers = Executors.newFixedThreadPool(2, r -> daemon(r, "auction-mover"));
    private final ExecutorService notifier = Executors.newFixedThreadPool(2, r -> daemon(r, "auction-notifier"));
    private final AtomicBoolean closing = new AtomicBoolean();

    Live(Store store, long idleMillis, Consumer<ItemState> publish) {
        this.store = store;
        this.idleMillis = idleMillis;
        this.publish = publish;
    }

    private static Thread daemon(Runnable r, String name) {
        Thread t = new Thread(r, name);
        t.setDaemon(true);
        return t;
    }

    /** Starts pending auctions (the first server does), loads the current items and starts the clock. */
    void start() throws java.sql.SQLException {
        for (ItemState s : store.startPendingAuctions()) {
            apply(s);
            publish.accept(s);
        }
        resync();
        clock.scheduleWithFixedDelay(this::tick, TICK_MILLIS, TICK_MILLIS, TimeUnit.MILLISECONDS);
        clock.scheduleWithFixedDelay(() -> {
            try {
                resync();
            } catch (Exception e) {
                log.warn("re-reading the current items: {}", e.toString());
            }
        }, RESYNC_MILLIS, RESYNC_MILLIS, TimeUnit.MILLISECONDS);
    }

    private void resync() throws java.sql.SQLException {
        for (ItemState s : store.currentItems()) {
            apply(s);
        }
    }

    /** Number of running auctions this server knows. */
    int size() {
        return auctions.size();
    }

    /**
     * Takes in a new state of an item (from this server's own transaction or
     * from the broker; duplicates and stale states are ignored) and wakes the
     * long polls it completes.
     */
    void apply(ItemState s) {
        Entry e = auctions.computeIfAbsent(s.auctionId(), k -> new Entry());
        List<Waiter> wake = new ArrayList<>();
        synchronized (e) {
            if (!s.live()) {
                synchronized (closed) {
                    ItemState old = closed.get(s.itemId());
                    if (old == null || s.version() > old.version()) {
                        closed.put(s.itemId(), s);
                    }
                }
            }
            if (e.cur == null || s.after(e.cur)) {
                e.cur = s;
                e.nextTry = 0;
            }
            for (Iterator<Waiter> it = e.waiters.iterator(); it.hasNext();) {
                Waiter w = it.next();
                if (w.itemId() == s.itemId() && s.version() > w.version()) {
                    it.remove();
                    wake.add(w);
                }
            }
        }
        for (Waiter w : wake) {
            notifier.execute(() -> w.complete(s));
        }
    }

    /**
     * The latest state of the item known here: the auction's current item,
     * or an item that closed recently; null when unknown (ask the database).
     */
    ItemState snapshot(long auctionId, long itemId) {
        Entry e = auctions.get(auctionId);
        if (e != null) {
            synchronized (e) {
                if (e.cur != null && e.cur.itemId() == itemId) {
                    return e.cur;
                }
            }
        }
        synchronized (closed) {
            return closed.get(itemId);
        }
    }

    /** The current item of the auction, or null when it is not running here. */
    ItemState current(long auctionId) {
        Entry e = auctions.get(auctionId);
        if (e == null) {
            return null;
        }
        synchronized (e) {
            return e.cur;
        }
    }

    /**
     * Registers a long poll; when the item has already moved past the
     * waiter's version it is completed at once.
     */
    void await(long auctionId, Waiter w) {
        Entry e = auctions.computeIfAbsent(auctionId, k -> new Entry());
        ItemState now = null;
        synchronized (e) {
            if (e.cur != null && e.cur.itemId() == w.itemId() && (e.cur.version() > w.version() || !e.cur.live())) {
                now = e.cur;
            } else {
                e.waiters.add(w);
            }
        }
        if (now == null) {
            ItemState c;
            synchronized (closed) {
                c = closed.get(w.itemId());
            }
            if (c != null && c.version() > w.version() && cancel(auctionId, w)) {
                now = c;
            }
        }
        if (now != null) {
            w.complete(now);
        }
    }

    /** Removes a waiter (its poll timed out or failed); false when it was already woken. */
    boolean cancel(long auctionId, Waiter w) {
        Entry e = auctions.get(auctionId);
        if (e == null) {
            return false;
        }
        synchronized (e) {
            return e.waiters.remove(w);
        }
    }

    /** Finds idle items and has them moved on (OPEN to LASTCALL to SOLD and the next item). */
    private void tick() {
        long now = System.currentTimeMillis();
        for (Entry e : auctions.values()) {
            ItemState cur;
            synchronized (e) {
                cur = e.cur;
                if (cur == null || !cur.live() || e.inFlight || now < cur.changedAt() + idleMillis
                        || now < e.nextTry) {
                    continue;
                }
                e.inFlight = true;
                e.nextTry = now + RETRY_MILLIS;
            }
            movers.execute(() -> move(e, cur));
        }
    }

    private void move(Entry e, ItemState cur) {
        try {
            for (ItemState s : store.advance(cur, idleMillis)) {
                apply(s);
                publish.accept(s);
            }
        } catch (Exception ex) {
            if (!closing.get()) {
                log.warn("moving item {} of auction {} on: {}", cur.itemId(), cur.auctionId(), ex.toString());
            }
        } finally {
            synchronized (e) {
                e.inFlight = false;
            }
        }
    }

    @Override
    public void close() {
        closing.set(true);
        clock.shutdownNow();
        movers.shutdownNow();
        notifier.shutdownNow();
    }
}
