/**
 * How the agent reaches the API server, without loading a Kubernetes client
 * library for the common cases:
 *  - `--apiserver URL` (with `--token-file`, `--ca-file`; in a pod these
 *    default to the mounted service-account token and CA): a direct address,
 *    so that the agent never depends on the `kubernetes` Service VIP that it
 *    programs itself (kube-proxy-free boot);
 *  - otherwise, in a pod, the in-cluster configuration (KUBERNETES_SERVICE_HOST
 *    and the service account; this goes through the `kubernetes` Service);
 *  - `--kubeconfig FILE` (alone or with `--apiserver`, whose address then
 *    replaces the kubeconfig's): parsed by @kubernetes/client-node, loaded only
 *    then (exec plugins, OIDC, client certificates, … are its business). Loading
 *    that library costs ~75 MiB of resident memory, more than the rest of the
 *    agent's code, which is why the direct cases do without it.
 */
import { existsSync, readFileSync } from 'node:fs';
import type https from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';

export const SA_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

export interface KubeConfigFlags {
  kubeconfig?: string;
  apiserver?: string;
  tokenFile?: string;
  caFile?: string;
}

/** What a request to the API server needs: where, and how to authenticate and trust it. */
export interface ApiConfig {
  /** Base URL, no trailing slash. */
  server(): string;
  /** Adds credentials and trust (Authorization, CA, client certificate) to a request's options. */
  applyToHTTPSOptions(opts: https.RequestOptions): Promise<void>;
}

/** A client-node KubeConfig as an ApiConfig (the type only here: the library is not loaded by this module). */
export function kubeApiConfig(kc: KubeConfig): ApiConfig {
  return {
    server: () => {
      const c = kc.getCurrentCluster();
      if (!c) throw new Error('kubeconfig has no current cluster');
      return c.server.replace(/\/+$/, '');
    },
    applyToHTTPSOptions: (opts) => kc.applyToHTTPSOptions(opts),
  };
}

export function inCluster(): boolean {
  return !!process.env.KUBERNETES_SERVICE_HOST && existsSync(`${SA_DIR}/token`);
}

/**
 * A server address with an optional bearer token file (re-read every minute:
 * projected tokens rotate; trimmed: files written by hand often end in a
 * newline) and CA file.
 */
export class DirectApiConfig implements ApiConfig {
  private token?: string;
  private readAt = 0;
  private readonly ca?: Buffer;

  constructor(
    private readonly url: string,
    private readonly tokenFile?: string,
    caFile?: string,
  ) {
    if (caFile) this.ca = readFileSync(caFile);
  }

  server(): string {
    return this.url;
  }

  async applyToHTTPSOptions(opts: https.RequestOptions): Promise<void> {
    if (this.ca) opts.ca = this.ca;
    if (!this.tokenFile) return;
    if (this.token === undefined || Date.now() - this.readAt > 60_000) {
      this.token = readFileSync(this.tokenFile, 'utf8').trim();
      this.readAt = Date.now();
    }
    opts.headers = { ...((opts.headers as Record<string, string>) ?? {}), Authorization: `Bearer ${this.token}` };
  }
}

/** `--apiserver` checked and normalised (no trailing slash). */
export function apiserverUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new Error(`--apiserver ${JSON.stringify(raw)} is not a URL (want https://HOST:PORT)`);
  }
  return url.toString().replace(/\/+$/, '');
}

/** The API configuration the flags ask for (see the top of this file). */
export async function loadApiConfig(f: KubeConfigFlags): Promise<ApiConfig> {
  if (f.kubeconfig) {
    const { loadKubeConfig, kubeApiConfig } = await import('./kubeconfig.js');
    return kubeApiConfig(loadKubeConfig(f));
  }
  if (f.apiserver) {
    const url = apiserverUrl(f.apiserver);
    const caFile = f.caFile ?? (existsSync(`${SA_DIR}/ca.crt`) ? `${SA_DIR}/ca.crt` : undefined);
    const tokenFile = f.tokenFile ?? (existsSync(`${SA_DIR}/token`) ? `${SA_DIR}/token` : undefined);
    if (url.startsWith('https:') && !caFile) throw new Error('--apiserver needs --ca-file (or the in-cluster service-account CA)');
    return new DirectApiConfig(url, tokenFile, caFile);
  }
  if (inCluster()) {
    const host = process.env.KUBERNETES_SERVICE_HOST!;
    const port = process.env.KUBERNETES_SERVICE_PORT ?? '443';
    return new DirectApiConfig(`https://${host.includes(':') ? `[${host}]` : host}:${port}`, `${SA_DIR}/token`, `${SA_DIR}/ca.crt`);
  }
  throw new Error('no API server configured: give --kubeconfig FILE or --apiserver URL (or run in a pod)');
}
