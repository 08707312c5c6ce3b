#!/usr/bin/env bash
# Makes the certificates of the pipeline's own TLS (docs/security.md, "TLS") with openssl:
#
#   tools/certs.sh <dir> [name ...]
#
#   <dir>/ca.crt, ca.key      a CA (kept in <dir> when it exists: run again to add names
#                             or to renew the leaf certificates under the same CA)
#   <dir>/node.crt, node.key  one certificate for every process (coordinators, workers,
#                             captures, cdcctl): serverAuth and clientAuth, no common name
#                             (etcd's gateway refuses client certificates with one once
#                             its authentication is on), subjectAltName DNS:localhost,
#                             IP:127.0.0.1 (also as a DNS name: NNG's TLS matches names
#                             only) and DNS:<name> for each name given (the host names
#                             workers dial and clients use, e.g. the Kubernetes Services)
#   <dir>/etcd.crt, etcd.key  the same, for an etcd member (--cert-file, --key-file)
#
# Environment: CERT_DAYS (default 365) is the leaf certificates' validity, CA_DAYS (3650)
# the CA's. The keys are written with mode 600. For a rotation without a stop, write the
# new files over the old ones (same paths): the processes read them again when they
# change, or on SIGHUP.
set -euo pipefail
dir=${1:?usage: tools/certs.sh <dir> [dns-name ...]}
shift
mkdir -p "$dir"
cd "$dir"
umask 077
days=${CERT_DAYS:-365}
san="DNS:localhost,DNS:127.0.0.1,IP:127.0.0.1"
for n in "$@"; do san="$san,DNS:$n"; done
if [ ! -s ca.crt ] || [ ! -s ca.key ]; then
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt \
        -subj "/CN=cdc-pipeline-ca" -days "${CA_DAYS:-3650}" 2>/dev/null
fi
printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\nkeyUsage=digitalSignature,keyEncipherment\n' \
    "$san" >leaf.ext
for leaf in node etcd; do
    openssl req -newkey rsa:2048 -nodes -keyout "$leaf.key.new" -out "$leaf.csr" \
        -subj "/O=cdc" 2>/dev/null
    openssl x509 -req -in "$leaf.csr" -CA ca.crt -CAkey ca.key -CAcreateserial \
        -days "$days" -out "$leaf.crt.new" -extfile leaf.ext 2>/dev/null
    # the key first, then the certificate, each by rename: a reader sees old or new files
    mv -f "$leaf.key.new" "$leaf.key"
    mv -f "$leaf.crt.new" "$leaf.crt"
    rm -f "$leaf.csr"
done
rm -f leaf.ext
chmod 600 ./*.key
echo "certificates in $dir: ca.crt, node.crt/node.key, etcd.crt/etcd.key (SAN $san)"
