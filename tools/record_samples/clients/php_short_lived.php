<?php
// php-amqplib (Debian package php-amqplib) scenario for tools/record_samples (scenario
// "php_short_lived"): one connection per published message.
// Run by findings.py as: php php_short_lived.php QUEUE COUNT PAUSE_MS, with
// AMQPCAP_HOST/USER/PASSWORD/VHOST in the environment.
// Prints one JSON line with what it did (per connection: local address, timings, declare-ok
// message count; the server product/version).
require_once '/usr/share/php/PhpAmqpLib/autoload.php';

use PhpAmqpLib\Connection\AMQPStreamConnection;
use PhpAmqpLib\Message\AMQPMessage;

[$_, $queue, $count, $pause_ms] = $argv;
$count = (int)$count;
$pause_ms = (int)$pause_ms;
$out = ['library' => 'php-amqplib ' . \PhpAmqpLib\Package::VERSION, 'php' => PHP_VERSION,
        'connections' => []];
$t0 = microtime(true);
for ($i = 0; $i < $count; $i++) {
    $start = microtime(true);
    $conn = new AMQPStreamConnection(getenv('AMQPCAP_HOST'), 5672, getenv('AMQPCAP_USER'),
                                     getenv('AMQPCAP_PASSWORD'), getenv('AMQPCAP_VHOST'));
    $local = stream_socket_get_name($conn->getIO()->getSocket(), false);
    $ch = $conn->channel();
    // passive=false, durable=false, exclusive=false, auto_delete=false
    [$qname, $msgs, $consumers] = $ch->queue_declare($queue, false, false, false, false);
    $msg = new AMQPMessage(sprintf('short-lived connection %d', $i), [
        'content_type' => 'text/plain',
        'delivery_mode' => AMQPMessage::DELIVERY_MODE_NON_PERSISTENT,
        'message_id' => sprintf('php-%02d', $i),
    ]);
    $ch->basic_publish($msg, '', $queue);
    $ch->close();
    $conn->close();
    $end = microtime(true);
    $sp = $conn->getServerProperties();
    $out['connections'][] = [
        'index' => $i, 'local' => $local, 'message_id' => sprintf('php-%02d', $i),
        'declare_ok_message_count' => $msgs,
        'start_s' => round($start - $t0, 4), 'end_s' => round($end - $t0, 4),
    ];
    if ($i === 0) {
        $out['server_product'] = $sp['product'][1] ?? null;
        $out['server_version'] = $sp['version'][1] ?? null;
    }
    if ($i < $count - 1) {
        usleep($pause_ms * 1000);
    }
}
$out['elapsed_s'] = round(microtime(true) - $t0, 3);
echo json_encode($out), "\n";
