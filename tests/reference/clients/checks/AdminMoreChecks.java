// ClientChecks: the Admin checks that need no topic of the main chain (a second task): transactions
// (AdminTransactionChecks), ACLs, client quotas, SCRAM credentials, features, the metadata quorum and
// an API shoal does not serve.

import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.QuorumInfo;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialDeletion;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.errors.ResourceNotFoundException;
import org.apache.kafka.common.errors.SecurityDisabledException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.quota.ClientQuotaFilterComponent;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;

final class AdminMoreChecks extends Support {
    private AdminMoreChecks() {
    }

    /** The Admin checks that need no topic of the main chain: a second task beside it. */
    static void adminMoreChecks() throws Exception {
        try (Admin admin = admin()) {
            AdminTransactionChecks.transactionAdminChecks(admin);
            aclChecks(admin);
            check("admin.alterClientQuotas+describeClientQuotas", () -> {
                String client = name("quota-client");
                ClientQuotaEntity entity = new ClientQuotaEntity(Map.of(ClientQuotaEntity.CLIENT_ID, client));
                ClientQuotaFilter filter = ClientQuotaFilter.containsOnly(List.of(
                        ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.CLIENT_ID, client)));
                get(admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity, List.of(
                        new ClientQuotaAlteration.Op("producer_byte_rate", 1048576.0),
                        new ClientQuotaAlteration.Op("request_percentage", 50.0))))).all());
                waitFor(() -> described(admin, filter).size() == 1, 10000, () -> "the quota described");
                Map<ClientQuotaEntity, Map<String, Double>> got = get(admin.describeClientQuotas(filter).entities());
                require(got.size() == 1 && Double.valueOf(1048576.0).equals(got.get(entity).get("producer_byte_rate"))
                        && Double.valueOf(50.0).equals(got.get(entity).get("request_percentage")), "described " + got);
                get(admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity, List.of(
                        new ClientQuotaAlteration.Op("producer_byte_rate", null),
                        new ClientQuotaAlteration.Op("request_percentage", null))))).all());
                waitFor(() -> described(admin, filter).isEmpty(), 10000, () -> "the quota gone");
                Map<ClientQuotaEntity, Map<String, Double>> gone = get(admin.describeClientQuotas(filter).entities());
                require(gone.isEmpty(), "after removal " + gone);
                Throwable bad = failure(admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity, List.of(
                        new ClientQuotaAlteration.Op("no_such_quota", 1.0))))).all());
                require(bad instanceof org.apache.kafka.common.errors.InvalidRequestException, "unknown key: " + bad);
                return "set, described, removed; unknown key: InvalidRequestException";
            });
            check("admin.alterUserScramCredentials+describeUserScramCredentials", () -> {
                String user = name("scram-user");
                get(admin.alterUserScramCredentials(List.of(new UserScramCredentialUpsertion(user,
                        new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), "secret"))).all());
                waitFor(() -> failure(admin.describeUserScramCredentials(List.of(user)).description(user)) == null,
                        10000, () -> "the credential described");
                Map<String, UserScramCredentialsDescription> d = get(admin.describeUserScramCredentials(List.of(user))
                        .all());
                List<ScramCredentialInfo> infos = d.get(user).credentialInfos();
                require(infos.size() == 1 && infos.get(0).mechanism() == ScramMechanism.SCRAM_SHA_256
                        && infos.get(0).iterations() == 8192, "described " + infos);
                List<String> users = get(admin.describeUserScramCredentials().users());
                require(users.contains(user), "all users " + users);
                get(admin.alterUserScramCredentials(List.of(new UserScramCredentialDeletion(user,
                        ScramMechanism.SCRAM_SHA_256))).all());
                waitFor(() -> failure(admin.describeUserScramCredentials(List.of(user)).description(user)) != null,
                        10000, () -> "the credential gone");
                Throwable gone = failure(admin.describeUserScramCredentials(List.of(user)).description(user));
                require(gone instanceof ResourceNotFoundException, "after deletion: " + gone);
                return "SCRAM-SHA-256/8192 upserted, described, deleted (then ResourceNotFound)";
            });
            check("admin.describeFeatures", () -> {
                FeatureMetadata f = get(admin.describeFeatures().featureMetadata());
                // every finalized level within the range the brokers support
                for (Map.Entry<String, org.apache.kafka.clients.admin.FinalizedVersionRange> e
                        : f.finalizedFeatures().entrySet()) {
                    org.apache.kafka.clients.admin.SupportedVersionRange s = f.supportedFeatures().get(e.getKey());
                    require(s != null && e.getValue().maxVersionLevel() <= s.maxVersion()
                            && e.getValue().minVersionLevel() >= s.minVersion(), "features " + f);
                }
                org.apache.kafka.clients.admin.FinalizedVersionRange tv = f.finalizedFeatures().get("transaction.version");
                if (target.equals("shoal")) {
                    // shoal implements transaction version 1 only (EndTxn up to v4): TV2 must never be finalized
                    require(tv == null || tv.maxVersionLevel() < 2, "transaction.version " + tv);
                } else {
                    require(f.finalizedFeatures().containsKey("metadata.version"), "features " + f);
                }
                return "finalized " + new TreeMap<>(f.finalizedFeatures()) + ", epoch " + f.finalizedFeaturesEpoch()
                        + "; supported " + new TreeMap<>(f.supportedFeatures()).keySet();
            });
            check("admin.describeMetadataQuorum", () -> {
                QuorumInfo q = get(admin.describeMetadataQuorum().quorumInfo());
                require(q.leaderId() >= 0 && !q.voters().isEmpty(), "quorum " + q);
                return "leader " + q.leaderId() + ", " + q.voters().size() + " voter(s), " + q.observers().size()
                        + " observer(s)";
            });
            check("admin.unsupported_api", () -> {
                Throwable t = failure(admin.describeDelegationToken().delegationTokens());
                if (target.equals("shoal")) {
                    require(t instanceof UnsupportedVersionException,
                            "describeDelegationToken on shoal (no DescribeDelegationToken API): " + t);
                    return "describeDelegationToken: UnsupportedVersionException (" + t.getMessage() + ")";
                }
                require(!(t instanceof UnsupportedVersionException), "Kafka serves it: " + t);
                return "describeDelegationToken on Kafka: " + (t == null ? "answered" : t.getClass().getSimpleName());
            });
        }
    }

    /** The ACLs a filter describes, or null when describing failed. */
    static Collection<AclBinding> aclsDescribed(Admin admin, AclBindingFilter filter) {
        try {
            return admin.describeAcls(filter).values().get(30, TimeUnit.SECONDS);
        } catch (Exception e) {
            return null;
        }
    }

    static void aclChecks(Admin admin) {
        String topic = name("acl-topic");
        AclBinding binding = new AclBinding(new ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL),
                new AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW));
        AclBinding prefixed = new AclBinding(new ResourcePattern(ResourceType.GROUP, name("acl-g"), PatternType.PREFIXED),
                new AccessControlEntry("User:bob", "*", AclOperation.DESCRIBE, AclPermissionType.DENY));
        AclBindingFilter ours = new AclBindingFilter(new ResourcePatternFilter(ResourceType.ANY, null, PatternType.ANY),
                new AccessControlEntryFilter(null, null, AclOperation.ANY, AclPermissionType.ANY));
        check("admin.createAcls+describeAcls+deleteAcls", () -> {
            Throwable created = failure(admin.createAcls(List.of(binding, prefixed)).all());
            if (created instanceof SecurityDisabledException) {
                Throwable d = failure(admin.describeAcls(ours).values());
                Throwable x = failure(admin.deleteAcls(List.of(ours)).all());
                require(d instanceof SecurityDisabledException && x instanceof SecurityDisabledException,
                        "describe " + d + ", delete " + x);
                return "no authorizer: SecurityDisabledException from all three";
            }
            require(created == null, "createAcls: " + created);
            // Kafka applies ACLs through its metadata log: describe sees them a moment later
            waitFor(() -> {
                Collection<AclBinding> now = aclsDescribed(admin, ours);
                return now != null && now.containsAll(List.of(binding, prefixed));
            }, 10000,
                    () -> "the new ACLs described");
            Collection<AclBinding> all = get(admin.describeAcls(ours).values());
            require(all.contains(binding) && all.contains(prefixed), "described " + all);
            Collection<AclBinding> one = get(admin.describeAcls(new AclBindingFilter(new ResourcePatternFilter(
                    ResourceType.TOPIC, topic, PatternType.MATCH), AccessControlEntryFilter.ANY)).values());
            require(one.size() == 1 && one.contains(binding), "MATCH filter " + one);
            Collection<AclBinding> deleted = get(admin.deleteAcls(List.of(binding.toFilter(), prefixed.toFilter()))
                    .all());
            require(deleted.size() == 2, "deleted " + deleted);
            waitFor(() -> {
                Collection<AclBinding> now = aclsDescribed(admin, ours);
                return now != null && !now.contains(binding) && !now.contains(prefixed);
            }, 10000, () -> "the deleted ACLs gone");
            Collection<AclBinding> left = get(admin.describeAcls(ours).values());
            require(!left.contains(binding) && !left.contains(prefixed), "left " + left);
            return "created literal + prefixed, described (ANY and MATCH), deleted both";
        });
    }

    /** The quotas a filter describes, or an empty map when describing failed. */
    static Map<ClientQuotaEntity, Map<String, Double>> described(Admin admin, ClientQuotaFilter filter) {
        try {
            return admin.describeClientQuotas(filter).entities().get(30, TimeUnit.SECONDS);
        } catch (Exception e) {
            return Map.of();
        }
    }
}
