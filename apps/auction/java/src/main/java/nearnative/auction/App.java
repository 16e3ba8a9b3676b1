package nearnative.auction;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.datatype.jsr310.JavaTimeModule;
import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import jakarta.servlet.ServletContextEvent;
import jakarta.servlet.ServletContextListener;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Wires the application together when Tomcat deploys it: the connection
 * pool, the broker, the live auctions. The database may come up after this
 * server: the live auctions start in the background, retrying, and until
 * then the health check says why the server is not ready. Registered in
 * WEB-INF/web.xml.
 */
public final class App implements ServletContextListener {
    private static final Logger log = LoggerFactory.getLogger(App.class);
    static final String ATTR = "nearnative.auction.app";

    Config cfg;
    ObjectMapper json;
    HikariDataSource pool;
    Store store;
    Broker broker;
    Live live;
    volatile String startProblem = "starting";
    private Thread starter;

    @Override
    public void contextInitialized(ServletContextEvent ev) {
        cfg = Config.fromEnv(System.getenv());
        json = new ObjectMapper().registerModule(new JavaTimeModule())
                .disable(SerializationFeature.WRITE_DATES_AS_TIMESTAMPS);
        HikariConfig hc = new HikariConfig();
        hc.setJdbcUrl("jdbc:postgresql://" + cfg.dbHost() + ":" + cfg.dbPort() + "/" + cfg.dbName());
        hc.setUsername(cfg.dbUser());
        hc.setPassword(cfg.dbPassword());
        hc.setMaximumPoolSize(cfg.dbPool());
        hc.setMinimumIdle(cfg.dbPool());
        hc.setConnectionTimeout(10_000);
        hc.setInitializationFailTimeout(-1);
        hc.setPoolName("auction-db");
        pool = new HikariDataSource(hc);
        store = new Store(pool);
        broker = new Broker(cfg, json);
        live = new Live(store, cfg.itemIdleMillis(), broker::publish);
        broker.start(live::apply);
        starter = new Thread(() -> {
            while (!Thread.currentThread().isInterrupted()) {
                try {
                    live.start();
                    startProblem = null;
                    log.info("node {}: {} live auctions, items idle after {} ms", cfg.node(), live.size(),
                            cfg.itemIdleMillis());
                    return;
                } catch (Exception e) {
                    startProblem = "database " + cfg.dbHost() + ":" + cfg.dbPort() + ": " + e.getMessage();
                    log.warn("starting the live auctions: {}", startProblem);
                    try {
                        Thread.sleep(1000);
                    } catch (InterruptedException ie) {
                        return;
                    }
                }
            }
        }, "auction-start");
        starter.setDaemon(true);
        starter.start();
        ev.getServletContext().setAttribute(ATTR, this);
    }

    @Override
    public void contextDestroyed(ServletContextEvent ev) {
        if (starter != null) {
            starter.interrupt();
        }
        if (live != null) {
            live.close();
        }
        if (broker != null) {
            broker.close();
        }
        if (pool != null) {
            pool.close();
        }
        // The JDBC driver came with this application: unregister it, as
        // Tomcat would otherwise do with a warning.
        java.util.Enumeration<java.sql.Driver> drivers = java.sql.DriverManager.getDrivers();
        while (drivers.hasMoreElements()) {
            java.sql.Driver d = drivers.nextElement();
            if (d.getClass().getClassLoader() == getClass().getClassLoader()) {
                try {
                    java.sql.DriverManager.deregisterDriver(d);
                } catch (java.sql.SQLException e) {
                    log.warn("unregistering the JDBC driver: {}", e.toString());
                }
            }
        }
    }
}
