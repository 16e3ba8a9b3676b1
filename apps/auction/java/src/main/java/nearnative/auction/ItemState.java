package nearnative.auction;

import java.math.BigDecimal;

/**
 * The bidding state of one item: what GetNextBid returns, what the broker
 * carries between application servers and what each server keeps in memory
 * for the current item of every live auction.
 *
 * <p>version grows by one with every change of the item (a bid, last call,
 * sold, reopened), across rounds; a long poll for version v completes once
 * the item's version exceeds v. (round, seq) orders the items of an auction:
 * round counts how often the auction ran out of items and started over.
 */
record ItemState(
        long auctionId,
        long itemId,
        int round,
        int seq,
        String state,
        int version,
        int bidCount,
        BigDecimal amount,
        Long bidderId,
        long changedAt) {

    static final String PENDING = "PENDING";
    static final String OPEN = "OPEN";
    static final String LASTCALL = "LASTCALL";
    static final String SOLD = "SOLD";
    static final String NOTSOLD = "NOTSOLD";

    /** Bids are taken in OPEN and LASTCALL. */
    boolean live() {
        return OPEN.equals(state) || LASTCALL.equals(state);
    }

    /** Whether this state of the same auction is later than o. */
    boolean after(ItemState o) {
        if (o == null) {
            return true;
        }
        if (round != o.round) {
            return round > o.round;
        }
        if (seq != o.seq) {
            return seq > o.seq;
        }
        return itemId == o.itemId && version > o.version;
    }
}
