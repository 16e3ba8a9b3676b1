package nearnative.auction;

import java.awt.Graphics2D;
import java.awt.RenderingHints;
import java.awt.image.BufferedImage;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import javax.imageio.ImageIO;

/**
 * Scales an uploaded image to the three sizes the application serves
 * (AddImageForItem), as Weathervane's image store does. The sizes match the
 * generated data (apps/auction/data.go).
 */
final class Images {
    private Images() {}

    static final int[] THUMB = {120, 90};
    static final int[] PREVIEW = {320, 240};
    static final int[] FULL = {640, 480};

    /** Returns the JPEG bytes of the thumbnail, preview and full size. */
    static byte[][] sizes(byte[] upload) throws IOException {
        BufferedImage src = ImageIO.read(new ByteArrayInputStream(upload));
        if (src == null) {
            throw new IllegalArgumentException("the upload is not an image ImageIO can read (want JPEG or PNG)");
        }
        return new byte[][] {jpeg(scale(src, THUMB)), jpeg(scale(src, PREVIEW)), jpeg(scale(src, FULL))};
    }

    private static BufferedImage scale(BufferedImage src, int[] wh) {
        BufferedImage dst = new BufferedImage(wh[0], wh[1], BufferedImage.TYPE_INT_RGB);
        Graphics2D g = dst.createGraphics();
        try {
            g.setRenderingHint(RenderingHints.KEY_INTERPOLATION, RenderingHints.VALUE_INTERPOLATION_BILINEAR);
            g.drawImage(src, 0, 0, wh[0], wh[1], null);
        } finally {
            g.dispose();
        }
        return dst;
    }

    private static byte[] jpeg(BufferedImage img) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        if (!ImageIO.write(img, "jpeg", out)) {
            throw new IOException("no JPEG writer");
        }
        return out.toByteArray();
    }
}
