// Produce records with explicit CreateTime timestamps through the Kafka Java producer,
// which writes ProducerRecord.timestamp() into the record's millisecond field as given
// (no conversion through nanoseconds), to partition 0, in order, acks=all.
//
// usage: java -cp <kafka-clients and slf4j-api jars> ProduceTimestamps.java BROKERS TOPIC
// stdin: one record a line, "<timestamp ms> <value hex>"; the ProducerRecord constructor
// refuses negative timestamps (-1 and pre-1970 need another client).
// stdout: one line a record, "<offset> <timestamp ms as acknowledged>".
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.HexFormat;
import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;

public class ProduceTimestamps {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("acks", "all");
        p.put("enable.idempotence", "true");
        p.put("key.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
        p.put("value.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p);
             BufferedReader in = new BufferedReader(new InputStreamReader(System.in))) {
            for (String line; (line = in.readLine()) != null; ) {
                if (line.isBlank()) continue;
                String[] f = line.trim().split(" ");
                long ts = Long.parseLong(f[0]);
                byte[] value = HexFormat.of().parseHex(f[1]);
                RecordMetadata md = producer.send(new ProducerRecord<byte[], byte[]>(args[1], 0, ts, null, value)).get();
                System.out.println(md.offset() + " " + md.timestamp());
            }
        }
    }
}
