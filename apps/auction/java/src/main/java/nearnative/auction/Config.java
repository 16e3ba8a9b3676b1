package nearnative.auction;

import java.util.Map;

/**
 * The application server's settings, from its environment (the Go spec
 * builder in apps/auction sets them). A missing or malformed value stops
 * the application at start with a message naming the variable.
 */
record Config(
        String node,
        String dbHost, int dbPort, String dbName, String dbUser, String dbPassword, int dbPool,
        String brokerHost, int brokerPort, String brokerUser, String brokerPassword,
        long itemIdleMillis, int pageSize) {

    static Config fromEnv(Map<String, String> env) {
        String[] db = hostPort(env, "AUCTION_DB");
        String[] broker = hostPort(env, "AUCTION_BROKER");
        return new Config(
                env.getOrDefault("AUCTION_NODE", "app"),
                db[0], Integer.parseInt(db[1]),
                env.getOrDefault("AUCTION_DB_NAME", "auction"),
                env.getOrDefault("AUCTION_DB_USER", "auction"),
                env.getOrDefault("AUCTION_DB_PASSWORD", "auction"),
                positive(env, "AUCTION_DB_POOL", 20),
                broker[0], Integer.parseInt(broker[1]),
                env.getOrDefault("AUCTION_BROKER_USER", "auction"),
                env.getOrDefault("AUCTION_BROKER_PASSWORD", "auction"),
                positive(env, "AUCTION_ITEM_IDLE_MS", 30_000),
                positive(env, "AUCTION_PAGE_SIZE", 5));
    }

    private static String[] hostPort(Map<String, String> env, String name) {
        String v = env.get(name);
        if (v == null || v.isEmpty()) {
            throw new IllegalArgumentException(name + " is not set: want host:port");
        }
        int i = v.lastIndexOf(':');
        if (i <= 0 || i == v.length() - 1) {
            throw new IllegalArgumentException(name + "=" + v + ": want host:port");
        }
        String host = v.substring(0, i);
        if (host.startsWith("[") && host.endsWith("]")) {
            host = host.substring(1, host.length() - 1);
        }
        String port = v.substring(i + 1);
        try {
            Integer.parseInt(port);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(name + "=" + v + ": port is not a number");
        }
        return new String[] {host, port};
    }

    private static int positive(Map<String, String> env, String name, int def) {
        String v = env.get(name);
        if (v == null || v.isEmpty()) {
            return def;
        }
        try {
            int n = Integer.parseInt(v);
            if (n > 0) {
                return n;
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        throw new IllegalArgumentException(name + "=" + v + ": want a positive integer");
    }
}
