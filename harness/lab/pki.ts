/**
 * Certificates and keys for the lab's control plane: a CA, the API server's
 * serving certificate, client certificates, and the service-account signing
 * key pair. X.509 issuance uses the openssl command (Node can parse
 * certificates but not sign them); key pairs for service accounts come from
 * node:crypto.
 */
import { execFileSync } from 'node:child_process';
import { generateKeyPairSync, X509Certificate } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface Pki {
  dir: string;
  caCert: string;
  caKey: string;
}

export interface IssuedCert {
  cert: string;
  key: string;
}

function openssl(args: string[], cwd: string): void {
  try {
    execFileSync('openssl', args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (e) {
    const err = e as { stderr?: Buffer; message: string };
    throw new Error(`openssl ${args[0]}: ${err.stderr?.toString().trim() || err.message}`);
  }
}

/** A self-signed CA (ECDSA P-256, ten years). */
export function createCa(dir: string, cn: string): Pki {
  const caKey = join(dir, 'ca.key');
  const caCert = join(dir, 'ca.crt');
  openssl(
    [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
      '-keyout', caKey, '-out', caCert, '-days', '3650', '-subj', `/CN=${cn}`,
      '-addext', 'basicConstraints=critical,CA:TRUE',
      '-addext', 'keyUsage=critical,keyCertSign,cRLSign,digitalSignature',
    ],
    dir,
  );
  return { dir, caCert, caKey };
}

export interface CertRequest {
  /** File name stem: <name>.crt, <name>.key. */
  name: string;
  cn: string;
  /** Organisations (Kubernetes groups for client certificates). */
  orgs?: string[];
  /** Subject alternative names: IP addresses and DNS names. */
  ips?: string[];
  dns?: string[];
  usage: 'server' | 'client';
}

/** Issues a certificate signed by the CA. */
export function issueCert(pki: Pki, r: CertRequest): IssuedCert {
  const key = join(pki.dir, `${r.name}.key`);
  const csr = join(pki.dir, `${r.name}.csr`);
  const cert = join(pki.dir, `${r.name}.crt`);
  const ext = join(pki.dir, `${r.name}.ext`);
  const subj = `${(r.orgs ?? []).map((o) => `/O=${o}`).join('')}/CN=${r.cn}`;
  const sans = [...(r.ips ?? []).map((ip) => `IP:${ip}`), ...(r.dns ?? []).map((d) => `DNS:${d}`)];
  writeFileSync(
    ext,
    [
      'basicConstraints=critical,CA:FALSE',
      'keyUsage=critical,digitalSignature,keyEncipherment',
      `extendedKeyUsage=${r.usage === 'server' ? 'serverAuth' : 'clientAuth'}`,
      ...(sans.length ? [`subjectAltName=${sans.join(',')}`] : []),
      '',
    ].join('\n'),
  );
  openssl(['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key, '-out', csr, '-subj', subj], pki.dir);
  openssl(['x509', '-req', '-in', csr, '-CA', pki.caCert, '-CAkey', pki.caKey, '-CAcreateserial', '-days', '3650', '-out', cert, '-extfile', ext], pki.dir);
  // Sanity: the SANs asked for are in the certificate.
  const x = new X509Certificate(readFileSync(cert));
  for (const ip of r.ips ?? []) {
    if (!x.checkIP(ip)) throw new Error(`pki: ${r.name}.crt lacks IP SAN ${ip}`);
  }
  return { cert, key };
}

/** The RSA key pair the API server signs service-account tokens with. */
export function createServiceAccountKeys(dir: string): { privateKey: string; publicKey: string } {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  const priv = join(dir, 'sa.key');
  const pub = join(dir, 'sa.pub');
  writeFileSync(priv, privateKey, { mode: 0o600 });
  writeFileSync(pub, publicKey);
  return { privateKey: priv, publicKey: pub };
}
