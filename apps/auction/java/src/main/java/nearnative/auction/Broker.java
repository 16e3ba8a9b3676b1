package nearnative.auction;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.rabbitmq.client.BuiltinExchangeType;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import com.rabbitmq.client.DeliverCallback;
import java.io.IOException;
import java.util.concurrent.TimeoutException;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The bid events between application servers, over RabbitMQ: every change
 * of an item's state (a bid, last call, sold, the next item) is published to
 * a fanout exchange, and every server consumes all of them through a queue
 * of its own (exclusive, server-named, gone with the connection).
 *
 * <p>The client library reconnects and re-declares the queue after a broker
 * outage; until the first connection succeeds, a background thread retries,
 * and the health check reports the broker as unreachable.
 */
final class Broker implements AutoCloseable {
    private static final Logger log = LoggerFactory.getLogger(Broker.class);
    static final String EXCHANGE = "auction.items";

    private final ConnectionFactory factory = new ConnectionFactory();
    private final ObjectMapper json;
    private final String node;
    private volatile Connection conn;
    private volatile Channel pub;
    private volatile String lastError = "broker: not connected yet";
    private volatile boolean closed;
    private Thread connector;

    Broker(Config cfg, ObjectMapper json) {
        this.json = json;
        this.node = cfg.node();
        factory.setHost(cfg.brokerHost());
        factory.setPort(cfg.brokerPort());
        factory.setUsername(cfg.brokerUser());
        factory.setPassword(cfg.brokerPassword());
        factory.setVirtualHost("/");
        factory.setAutomaticRecoveryEnabled(true);
        factory.setTopologyRecoveryEnabled(true);
        factory.setNetworkRecoveryInterval(1000);
        factory.setConnectionTimeout(5000);
        factory.setRequestedHeartbeat(10);
    }

    /** Connects (retrying in the background until it succeeds) and delivers every event to onEvent. */
    void start(Consumer<ItemState> onEvent) {
        connector = new Thread(() -> {
            while (!closed) {
                try {
                    connect(onEvent);
                    log.info("connected to the broker at {}:{}", factory.getHost(), factory.getPort());
                    return;
                } catch (IOException | TimeoutException e) {
                    lastError = "broker " + factory.getHost() + ":" + factory.getPort() + " unreachable: " + e;
                    log.warn(lastError);
                    try {
                        Thread.sleep(1000);
                    } catch (InterruptedException ie) {
                        return;
                    }
                }
            }
        }, "auction-broker-connect");
        connector.setDaemon(true);
        connector.start();
    }

    private void connect(Consumer<ItemState> onEvent) throws IOException, TimeoutException {
        Connection c = factory.newConnection("auction-" + node);
        try {
            Channel ch = c.createChannel();
            ch.exchangeDeclare(EXCHANGE, BuiltinExchangeType.FANOUT, false, false, null);
            String q = ch.queueDeclare().getQueue();
            ch.queueBind(q, EXCHANGE, "");
            DeliverCallback deliver = (tag, msg) -> {
                try {
                    onEvent.accept(json.readValue(msg.getBody(), ItemState.class));
                } catch (Exception e) {
                    log.warn("bad event from the broker: {}", e.toString());
                }
            };
            ch.basicConsume(q, true, deliver, tag -> log.warn("broker cancelled the event consumer"));
            pub = c.createChannel();
            conn = c;
        } catch (IOException e) {
            c.abort();
            throw e;
        }
    }

    /** Broadcasts a new item state to every application server, this one included. */
    void publish(ItemState s) {
        Channel ch = pub;
        if (ch == null) {
            log.warn("not connected to the broker: event for item {} not broadcast", s.itemId());
            return;
        }
        try {
            byte[] body = json.writeValueAsBytes(s);
            synchronized (this) {
                ch.basicPublish(EXCHANGE, "", null, body);
            }
        } catch (Exception e) {
            log.warn("broadcasting item {}: {}", s.itemId(), e.toString());
        }
    }

    /** Null when connected, else why not. */
    String problem() {
        Connection c = conn;
        if (c == null) {
            return lastError;
        }
        if (!c.isOpen()) {
            return "broker " + factory.getHost() + ":" + factory.getPort() + " connection lost: "
                    + c.getCloseReason();
        }
        return null;
    }

    @Override
    public void close() {
        closed = true;
        if (connector != null) {
            connector.interrupt();
        }
        Connection c = conn;
        if (c != null) {
            try {
                c.close(2000);
            } catch (Exception e) {
                // shutting down anyway
            }
        }
    }
}
