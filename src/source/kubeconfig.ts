/**
 * A kubeconfig through @kubernetes/client-node (the agent loads this module
 * only for --kubeconfig: see apiconfig.ts). How the flags combine:
 *  - `--apiserver URL` (with `--token-file`, `--ca-file`; in a pod these default
 *    to the mounted service-account token and CA): a direct address, so that
 *    the agent never depends on the `kubernetes` Service VIP that it programs
 *    itself (kube-proxy-free boot). With `--kubeconfig` too, the kubeconfig's
 *    credentials are used against this address.
 *  - `--kubeconfig FILE`;
 *  - otherwise, in a pod, the in-cluster configuration (which does go through
 *    the `kubernetes` Service: fine only when something else serves it).
 */
import { existsSync, readFileSync } from 'node:fs';
import { KubeConfig, type User } from '@kubernetes/client-node';
import type https from 'node:https';
import { SA_DIR, apiserverUrl, inCluster, kubeApiConfig, type KubeConfigFlags } from './apiconfig.js';

export { SA_DIR, inCluster, kubeApiConfig, type KubeConfigFlags };

const TOKEN_FILE_PROVIDER = 'switchyard-token-file';

/**
 * Bearer token read from a file, re-read every minute (projected tokens rotate)
 * and trimmed (files written by hand often end in a newline).
 */
class TokenFileAuth {
  private token?: string;
  private readAt = 0;
  isAuthProvider(user: User): boolean {
    return user.authProvider?.name === TOKEN_FILE_PROVIDER;
  }
  async applyAuthentication(user: User, opts: https.RequestOptions): Promise<void> {
    const path = user.authProvider!.config.path as string;
    if (this.token === undefined || Date.now() - this.readAt > 60_000) {
      this.token = readFileSync(path, 'utf8').trim();
      this.readAt = Date.now();
    }
    opts.headers = { ...(opts.headers ?? {}), Authorization: `Bearer ${this.token}` };
  }
}

export function loadKubeConfig(f: KubeConfigFlags): KubeConfig {
  const kc = new KubeConfig();
  kc.addAuthenticator(new TokenFileAuth());
  if (f.kubeconfig) kc.loadFromFile(f.kubeconfig);
  if (f.apiserver) {
    const server = apiserverUrl(f.apiserver);
    if (f.kubeconfig) {
      const c = kc.getCurrentCluster();
      if (!c) throw new Error(`${f.kubeconfig}: no current cluster`);
      kc.clusters = kc.clusters.map((x) => (x.name === c.name ? { ...x, server } : x));
      return kc;
    }
    const caFile = f.caFile ?? (existsSync(`${SA_DIR}/ca.crt`) ? `${SA_DIR}/ca.crt` : undefined);
    const tokenFile = f.tokenFile ?? (existsSync(`${SA_DIR}/token`) ? `${SA_DIR}/token` : undefined);
    if (server.startsWith('https:') && !caFile) throw new Error('--apiserver needs --ca-file (or the in-cluster service-account CA)');
    kc.loadFromClusterAndUser(
      { name: 'direct', server, caFile, skipTLSVerify: false },
      tokenFile ? { name: 'direct', authProvider: { name: TOKEN_FILE_PROVIDER, config: { path: tokenFile } } } : { name: 'direct' },
    );
    return kc;
  }
  if (f.kubeconfig) return kc;
  if (inCluster()) {
    kc.loadFromCluster();
    return kc;
  }
  throw new Error('no API server configured: give --kubeconfig FILE or --apiserver URL (or run in a pod)');
}
