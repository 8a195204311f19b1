# Bunny (Ruby) scenario for tools/record_samples (scenario "bunny_ruby").
# Run by scenarios.py as: ruby bunny_scenario.rb, with AMQPCAP_HOST/USER/PASSWORD/VHOST in the
# environment. Prints one JSON line with what the client saw.
require "bunny"
require "json"

Q = "amqpcap.bunny"
seen = { "confirm_waits" => [], "deliveries" => [], "get_ok" => 0, "get_empty" => 0 }

conn = Bunny.new(host: ENV.fetch("AMQPCAP_HOST"), port: 5672, vhost: ENV.fetch("AMQPCAP_VHOST"),
                 user: ENV.fetch("AMQPCAP_USER"), pass: ENV.fetch("AMQPCAP_PASSWORD"),
                 automatically_recover: false, logger: Logger.new(nil))
conn.start

pub = conn.create_channel                       # channel 1
pub.confirm_select
q = pub.queue(Q, exclusive: true)               # queue.declare
publish = lambda do |i|
  pub.default_exchange.publish("bunny message #{i}", routing_key: Q, message_id: "bunny-#{i}",
                               content_type: "text/plain", headers: { "x-client" => "bunny", "x-seq" => i },
                               timestamp: 1_700_000_000 + i)
  seen["confirm_waits"] << pub.wait_for_confirms   # one unconfirmed message at a time
end
3.times { |i| publish.call(i) }

cons = conn.create_channel                      # channel 2
cons.prefetch(2)                                # basic.qos
cq = cons.queue(Q, exclusive: true)             # queue.declare again (same connection: allowed)
done = Queue.new
held = nil
consumer = cq.subscribe(manual_ack: true) do |info, props, body|
  seen["deliveries"] << { "id" => props.message_id, "tag" => info.delivery_tag.to_i, "redelivered" => info.redelivered? }
  case props.message_id
  when "bunny-1" then held = info.delivery_tag                    # settled by the next multiple ack
  when "bunny-2" then cons.ack(info.delivery_tag, true)           # multiple: settles bunny-1 too
  else cons.ack(info.delivery_tag)
  end
  done << true if seen["deliveries"].size == 3
end
done.pop
consumer.cancel                                 # basic.cancel / cancel-ok

publish.call(3)
info, _props, _body = cq.pop(manual_ack: true)  # basic.get -> get-ok
if info
  seen["get_ok"] += 1
  cons.ack(info.delivery_tag)
end
info, _props, _body = cq.pop(manual_ack: true)  # basic.get -> get-empty
seen["get_empty"] += 1 if info.nil?

conn.close                                      # channel.close 200 for channels 1 and 2, connection.close 200
puts JSON.generate(seen)
