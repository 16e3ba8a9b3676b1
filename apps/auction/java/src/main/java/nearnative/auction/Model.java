package nearnative.auction;

import java.math.BigDecimal;
import java.time.OffsetDateTime;
import java.util.List;

/** The JSON representations of the REST API (Jackson writes records as objects). */
final class Model {
    private Model() {}

    record User(long id, String email, String firstName, String lastName, BigDecimal creditLimit,
            OffsetDateTime createdAt, OffsetDateTime updatedAt) {}

    record Login(long userId, String email) {}

    record Auction(long id, String name, String category, long auctioneerId, String state,
            OffsetDateTime startTime, Long currentItemId, int round) {}

    record Image(long id, String thumbnail, String preview, String full) {
        static Image of(long id) {
            String base = "/auction/image/" + id + "/";
            return new Image(id, base + "thumb", base + "preview", base + "full");
        }
    }

    record Item(long id, Long auctionId, int seq, long sellerId, String name, String description,
            String manufacturer, String condition, BigDecimal startingBid, String state,
            BigDecimal highAmount, Long highBidderId, int bidCount, int version, List<Image> images) {}

    record Bid(long id, long auctionId, long itemId, String itemName, BigDecimal amount,
            OffsetDateTime placedAt, String state) {}

    record Attendance(long id, long auctionId, String auctionName, OffsetDateTime joinedAt,
            OffsetDateTime leftAt) {}

    record Purchase(long id, long auctionId, long itemId, String itemName, BigDecimal price,
            OffsetDateTime purchasedAt, List<Image> images) {}

    /** A page of a collection; total counts the whole collection where it is known (else null). */
    record Page<T>(int page, int pageSize, Long total, List<T> items) {}

    /**
     * The answer to PlaceBid: result is ACCEPTED or REJECTED (with the
     * reason); item is the item's state after the bid.
     */
    record BidResult(String result, String reason, ItemState item) {}

    /** Every error response: HTTP status >= 400 and this body. */
    record Error(String error) {}
}
