export interface ServerSecretsTable {
  name: string;
  value: string;
}
