#!/bin/sh
# Certificates for librdkafka's SSL tests against shoal (docs/compatibility.md,
# "librdkafka's security tests (issue #19)"). Made with openssl as trivup's SslApp makes them
# for librdkafka's own runs: one CA, a broker certificate (CN=localhost, SAN localhost/127.0.0.1),
# a client certificate whose key is encrypted with $PASS, and the client's files in every
# encoding 0097_ssl_verify reads from trivup's SSL_* environment variables (PKCS#12, DER, PEM).
# Usage: make_certs.sh DIR   -> DIR/{ca,server,client}.*, DIR/ssl_env.sh (the SSL_* exports)
set -e
D=${1:?usage: make_certs.sh DIR}; PASS=${PASS:-12345678}
mkdir -p "$D"; cd "$D"
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 365 -subj "/CN=shoal-librdkafka-ca" 2>/dev/null
openssl x509 -in ca.pem -outform DER -out ca.der
# broker
openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj "/CN=localhost" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n' > server.ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.crt -days 365 -extfile server.ext 2>/dev/null
cat server.key server.crt ca.pem > server.pem           # ssl.keystore.type=PEM: key + chain
# client (key encrypted, as trivup's)
openssl req -newkey rsa:2048 -nodes -keyout client.plain.key -out client.csr -subj "/CN=client" 2>/dev/null
printf 'extendedKeyUsage=clientAuth\n' > client.ext
openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 365 -extfile client.ext 2>/dev/null
openssl pkcs8 -topk8 -in client.plain.key -out client.key -passout "pass:$PASS" -v2 aes-256-cbc
openssl x509 -in client.pem -outform DER -out client.der
openssl pkcs8 -topk8 -nocrypt -in client.plain.key -outform DER -out client.key.der
openssl pkcs12 -export -in client.pem -inkey client.plain.key -certfile ca.pem -out client.p12 -passout "pass:$PASS"
cat > ssl_env.sh <<ENV
export SSL_password=$PASS
export SSL_pkcs=$PWD/client.p12
export SSL_pub_der=$PWD/client.der
export SSL_pub_pem=$PWD/client.pem
export SSL_priv_der=$PWD/client.key.der
export SSL_priv_pem=$PWD/client.key
export SSL_ca_der=$PWD/ca.der
export SSL_ca_pem=$PWD/ca.pem
export SSL_all_cas_pem=$PWD/ca.pem
export SSL_client_auth=required
ENV
echo "made $PWD"
