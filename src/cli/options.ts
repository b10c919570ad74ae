/** Options shared by `switchyard` and `kubectl switchyard`: what explain and trace ask about one flow. */
export const FLOW_OPTIONS = {
  probe: { type: 'boolean' },
  from: { type: 'string' },
  to: { type: 'string' },
  proto: { type: 'string' },
  'node-client': { type: 'boolean' },
  cookie: { type: 'string' },
} as const;
